import { SetupError } from "./errors/setup.js";

/** The one rule for every URL that keys or prompts travel in: the API base URL and each upstream. */

const loopbackHosts = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\]|[a-z0-9-]+\.localhost)$/i;

/** Whether `hostname` is this machine: where plain HTTP is allowed, for development. */
export function isLoopbackHost(hostname: string): boolean {
  return loopbackHosts.test(hostname);
}

/** Plain HTTP is for loopback development only; a remote `http:` base URL would leak keys and prompts. */
export function assertSecureUrl(value: string, what = "base URL"): URL {
  const url = new URL(value);
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url;
  throw new SetupError(
    "insecure_url",
    `the ${what} ${url.origin} is refused: it must use https: (plain http: is allowed only for loopback hosts such as localhost in development), because API keys and prompts travel in it.`,
  );
}
