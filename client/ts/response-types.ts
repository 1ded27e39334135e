// Checked by tsc (make ts-check): the generated types say exactly what the
// server sends. A response's decimal is a string and its counts are
// numbers, so a client never narrows a read; a request's decimal may be a
// number or a string, as the interface says. Each line fails to compile if
// its type drifts.
import type { components } from "./schema";

type Schemas = components["schemas"];
type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export const responseAmountIsString: Exactly<Schemas["Invoice"]["amount"], string> = true;
export const responseBalanceIsString: Exactly<Schemas["Invoice"]["balance"], string> = true;
export const responseLineQuantityIsString: Exactly<Schemas["InvoiceLine"]["quantity"], string> = true;
export const responsePaymentAmountIsString: Exactly<Schemas["Payment"]["amount"], string> = true;
export const responseLineCountIsNumber: Exactly<Schemas["Invoice"]["lines"], number> = true;
export const responseFailedAttemptsIsNumber: Exactly<Schemas["Invoice"]["failedAttempts"], number> = true;
export const requestAmountIsNumberOrString: Exactly<Schemas["CreatePaymentRequest"]["amount"], number | string> = true;
export const requestQuantityIsNumberOrString: Exactly<Schemas["InvoiceLineInput"]["quantity"], number | string> = true;
