// A payreq webhook receiver in TypeScript with Node's own crypto (docs/events-and-webhooks.md);
// type-checked by make ts-check against schema.d.ts, so the
// event payloads it narrows on are the ones the server sends.
//   PAYREQ_WEBHOOK_SECRET=whsec_… node dist/webhook-receiver.js
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import type { components } from "./schema";

type Event = components["schemas"]["Event"];

const toleranceSeconds = 5 * 60;

// verify checks one delivery as the Standard Webhooks specification says:
// one of the space-separated v1 signatures is the HMAC-SHA256 of
// id.timestamp.body under the secret's bytes, and the timestamp is recent.
export function verify(secret: string, headers: Record<string, string | string[] | undefined>, body: string): Event {
  const header = (name: string): string => {
    const v = headers[name];
    if (typeof v !== "string" || v === "") throw new Error(`missing ${name}`);
    return v;
  };
  const id = header("webhook-id");
  const timestamp = header("webhook-timestamp");
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) throw new Error("stale timestamp");
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest();
  const matches = header("webhook-signature")
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .some((s) => {
      const got = Buffer.from(s.slice(3), "base64");
      return got.length === expected.length && timingSafeEqual(got, expected);
    });
  if (!matches) throw new Error("no signature matches");
  return JSON.parse(body) as Event;
}

const seen = new Set<string>();

function handle(event: Event): void {
  switch (event.type) {
    case "invoice.paid":
      console.log(`invoice ${event.data.invoiceNumber} paid: ${event.data.amountPaid}`);
      break;
    case "card_payment.refunded":
      console.log(`refund of ${event.data.amount} on ${event.data.invoiceNumber}`);
      break;
    case "deposit.created":
      console.log(`deposit of ${event.data.netAmount} expected ${event.data.expectedAt}`);
      break;
    default:
      console.log(`${event.type} ${event.id}`);
  }
}

const secret = process.env["PAYREQ_WEBHOOK_SECRET"] ?? "";
if (secret !== "") {
  createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      try {
        const event = verify(secret, req.headers, body);
        if (!seen.has(event.id)) {
          seen.add(event.id);
          handle(event);
        }
        res.writeHead(204).end();
      } catch {
        res.writeHead(400).end();
      }
    });
  }).listen(9000, "127.0.0.1");
}
