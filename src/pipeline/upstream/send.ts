/**
 * One call to one upstream: its URL, its credential (sent only to the origin it was stored for),
 * and the reason it gives when it refuses, as a client may read it (a credential never quoted).
 */
import type { Upstream } from "../../catalogue/entry.js";
import type { Accounts } from "../../accounts/accounts.js";
import { readBounded } from "../read-bounded.js";
import type { UpstreamCall } from "./plan.js";

/** How to call an upstream: the headers (with its credential) and the secret, to keep out of reasons. */
export interface Authorised {
  headers: Record<string, string>;
  secret: string | undefined;
}

/**
 * The headers for `upstream`, with its stored credential; a reason instead when the credential is
 * missing or stored for another origin (a credential goes to the origin it was stored for and
 * nowhere else, whatever the catalogue says now).
 */
export async function authorise(
  accounts: Accounts,
  upstream: Upstream,
  stream: boolean,
): Promise<Authorised | { refused: string }> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: stream ? "text/event-stream" : "application/json",
  };
  if (!upstream.credential) return { headers, secret: undefined };
  const stored = await accounts.upstreamSecret(upstream.credential);
  const upstreamOrigin = new URL(upstream.baseUrl).origin;
  if (stored === undefined)
    return {
      refused: `${upstream.name}: no credential is stored under '${upstream.credential}' (store it once with admin.setUpstreamCredential)`,
    };
  if (stored.origin !== upstreamOrigin) {
    return {
      refused: `${upstream.name}: the credential '${upstream.credential}' is stored for ${stored.origin ?? "no origin"}, not ${upstreamOrigin}, so it was not sent (store it for ${upstreamOrigin} with admin.setUpstreamCredential if that is where it belongs)`,
    };
  }
  return { headers: { ...headers, authorization: `Bearer ${stored.secret}` }, secret: stored.secret };
}

/**
 * The largest double below 2⁶³. OpenAI's seeds run from −2⁶³ to 2⁶³ − 1; the ends parse as ±2⁶³,
 * which JSON writes as ±9223372036854776000, past an upstream's 64-bit integer: a seed goes
 * within ± this.
 */
const largestSeed = 2 ** 63 - 1024;

/** The client's seed as an upstream's 64-bit integer holds it (the same seed but at the very ends). */
function upstreamSeed(seed: unknown): { seed: number } | object {
  return typeof seed === "number" ? { seed: Math.min(Math.max(seed, -largestSeed), largestSeed) } : {};
}

/** Sends the plan's body (or one of its prompts) to `upstream`, with the upstream's model name. */
export function send(
  fetcher: typeof fetch,
  upstream: Upstream,
  plan: UpstreamCall,
  authorised: Authorised,
  prompt: string | number[] | undefined,
  signal: AbortSignal,
): Promise<Response> {
  const { echo: _echo, ...asked } = plan.body;
  const body = {
    // `echo` is done here (plan.echo), so every upstream's answer starts the same way.
    ...(plan.echo ? asked : plan.body),
    model: upstream.model,
    ...(prompt !== undefined ? { prompt } : {}),
    ...upstreamSeed(plan.body.seed),
    // A stream always asks for usage, so the bill uses the upstream's own counts.
    ...(plan.stream
      ? { stream_options: { ...(plan.body.stream_options as object | undefined), include_usage: true } }
      : {}),
  };
  const url = `${upstream.baseUrl.replace(/\/+$/, "")}/${plan.endpoint}`;
  // A redirect is not followed: a 307 or 308 resends the prompt, and browsers from before the
  // Fetch standard's 2023 change keep the credential, to an origin the app did not configure.
  const init: RequestInit = { method: "POST", headers: authorised.headers, body: JSON.stringify(body), signal };
  return fetcher(url, { ...init, redirect: "error" });
}

export interface Reason {
  message: string;
  code: string | null;
  param: string | null;
}

/** Upstream statuses that speak of our credential: their text is never passed on. */
const credentialRefusals = new Set([401, 403]);

/**
 * Whether `text` could carry part of `secret`: any 8 characters of it in a row (a server may echo
 * a key whole, cut, or masked at its ends). Linear in both.
 */
function mayCarry(text: string, secret: string | undefined): boolean {
  if (!secret) return false;
  const width = Math.min(8, secret.length);
  const slices = new Set<string>();
  for (let start = 0; start + width <= secret.length; start++) slices.add(secret.slice(start, start + width));
  for (let start = 0; start + width <= text.length; start++)
    if (slices.has(text.slice(start, start + width))) return true;
  return false;
}

/**
 * The reason an upstream gives for refusing, as a client may read it: a refusal of our credential
 * (401, 403) in our own words, and any text that could carry the credential withheld.
 */
export async function safeReason(response: Response, upstream: Upstream, secret: string | undefined): Promise<Reason> {
  if (credentialRefusals.has(response.status)) {
    await response.body?.cancel().catch(() => undefined);
    const which = upstream.credential
      ? `the credential stored as '${upstream.credential}'`
      : "no credential (this upstream has none configured)";
    return {
      message: `it refused the request as unauthorised; it was sent ${which}: store a valid one with admin.setUpstreamCredential`,
      code: "upstream_unauthorized",
      param: null,
    };
  }
  const reason = await upstreamReason(response);
  return mayCarry(`${reason.message} ${reason.code ?? ""} ${reason.param ?? ""}`, secret)
    ? { message: "its reason is withheld: it quoted the credential", code: null, param: null }
    : reason;
}

/** An error body's reason is a sentence: more than this is not read. */
const maxReasonBytes = 64 * 2 ** 10;

/** The reason an upstream gives in its error body, in any of the shapes these servers use. */
async function upstreamReason(response: Response): Promise<Reason> {
  const text = (await readBounded(response.body, maxReasonBytes).catch(() => ({ text: "" }))).text.trim();
  try {
    // Every field is the upstream's to fill: only strings are taken as they are.
    const body = JSON.parse(text) as {
      error?: string | { message?: unknown; code?: unknown; param?: unknown };
      message?: unknown;
      detail?: unknown;
    } | null;
    if (typeof body?.error === "string") return { message: body.error, code: null, param: null };
    if (typeof body?.error?.message === "string" && body.error.message)
      return {
        message: body.error.message,
        // OpenAI's codes are names; llama-server's is the HTTP status again, which says nothing more.
        code: typeof body.error.code === "string" ? body.error.code : null,
        param: typeof body.error.param === "string" ? body.error.param : null,
      };
    const said = body?.message ?? body?.detail;
    if (typeof said === "string" && said) return { message: said, code: null, param: null };
  } catch {
    // Not JSON: the text itself is the reason.
  }
  return { message: text.slice(0, 300) || response.statusText || "no reason given", code: null, param: null };
}
