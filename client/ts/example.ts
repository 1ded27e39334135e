// token → create → read with the types generated from openapi.yaml
// (schema.d.ts, `make ts-generate`) and openapi-fetch: every path, parameter,
// body and answer below is checked by tsc against the spec.
//
//   PAYREQ_URL=http://127.0.0.1:8080 PAYREQ_KEY_ID=mk_… PAYREQ_SECRET=ms_…
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

type Problem = components["schemas"]["Problem"];

const baseUrl = process.env.PAYREQ_URL ?? "http://127.0.0.1:8080";
const keyId = process.env.PAYREQ_KEY_ID ?? "";
const secret = process.env.PAYREQ_SECRET ?? "";

const api = createClient<paths>({ baseUrl });

// The token lasts expires_in (600) seconds: reuse it until a minute before
// then, and share one token request among the calls that need it meanwhile.
let token: { value: Promise<string>; renewAt: number } | undefined;

function accessToken(): Promise<string> {
  if (token && Date.now() < token.renewAt) {
    return token.value;
  }
  const asked = Date.now();
  const value = api
    .POST("/oauth/token", {
      body: { grant_type: "client_credentials", client_id: keyId, client_secret: secret },
    })
    .then(({ data, error, response }) => {
      if (!data) {
        token = undefined;
        // OAuth errors carry error/error_description; a 503 is a problem document.
        const reason = error && "error" in error ? `${error.error}: ${error.error_description}` : error?.title;
        throw new Error(`token: ${response.status} ${reason}`);
      }
      token = { value, renewAt: asked + (data.expires_in - 60) * 1000 };
      return data.access_token;
    });
  token = { value, renewAt: Infinity };
  return value;
}

const bearer: Middleware = {
  async onRequest({ request, schemaPath }) {
    if (schemaPath !== "/oauth/token") {
      request.headers.set("Authorization", `Bearer ${await accessToken()}`);
    }
    return request;
  },
};
api.use(bearer);

function failed(what: string, status: number, problem: Problem | undefined): Error {
  const fields = problem?.errors ? ` ${JSON.stringify(problem.errors)}` : "";
  return new Error(`${what}: ${status} ${problem?.title}: ${problem?.detail}${fields}`);
}

async function main(): Promise<void> {
  const accounts = await api.GET("/accounts");
  if (!accounts.data) {
    throw failed("GET /accounts", accounts.response.status, accounts.error);
  }
  const mid = accounts.data[0];
  if (!mid) {
    throw new Error("the key's organization has no MIDs");
  }
  console.log(`MID ${mid.mid} (id ${mid.id})`);

  // Decimals go as strings, so no amount passes through a binary float:
  // 2 × 45.50 + 1 × 12.30 = 103.30.
  const created = await api.POST("/payment-requests", {
    params: { header: { "Idempotency-Key": crypto.randomUUID() } },
    body: {
      merchantAccountId: mid.id,
      invoiceNumber: `INV-TS-${Date.now()}`,
      amount: "103.30",
      poNumber: "PO-7781",
      customerName: "Dana Whitfield",
      customerCompany: "Whitfield Catering LLC",
      customerEmail: "dana@example.com",
      customerPhone: "+15125550148",
      delivery: "email",
      memo: "Thank you for your business.",
      dueDate: new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10),
      lines: [
        { description: "Chafing dish rental", quantity: "2", unitCost: "45.50", uom: "EA", commodityCode: "5310", upc: "036000291452" },
        { description: "Delivery", quantity: "1", unitCost: "12.30", uom: "EA", commodityCode: null, upc: null },
      ],
      send: false, // true (or null) also sends the pay link to the customer now
    },
  });
  if (!created.data) {
    throw failed("POST /payment-requests", created.response.status, created.error);
  }
  console.log(`created invoice ${created.data.invoiceNumber} (id ${created.data.id}), pay link ${created.data.link}`);

  const got = await api.GET("/payment-requests/{id}", { params: { path: { id: created.data.id } } });
  if (!got.data) {
    throw failed("GET /payment-requests/{id}", got.response.status, got.error);
  }
  const invoice = got.data;
  // The same address answers the invoice as a PDF document to Accept: application/pdf.
  if (typeof invoice === "string") {
    throw new Error("GET /payment-requests/{id} answered a PDF document; this example reads JSON");
  }
  console.log(`read back: status ${invoice.status}, amount ${invoice.amount}, balance ${invoice.balance}, ${invoice.lines} lines`);
  console.log(JSON.stringify(invoice, null, 2));
}

main().catch((err: unknown) => {
  console.error("example:", err instanceof Error ? err.message : err);
  process.exit(1);
});
