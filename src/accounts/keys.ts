/** API keys: `sk-` and 32 random bytes, stored only as a SHA-256 hash. */
const keyBytes = 32;

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function generateKey(): string {
  return `sk-${base64url(crypto.getRandomValues(new Uint8Array(keyBytes)))}`;
}

/** What a person sees to tell keys apart; short enough to say nothing useful about the secret. */
export function keyPrefix(key: string): string {
  return `${key.slice(0, 7)}…`;
}

export async function hashKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Equal-length strings compared without an early exit, so timing says nothing of where they differ. */
export function constantTimeEqual(left: string, right: string): boolean {
  if (left.length !== right.length) return false;
  let difference = 0;
  for (let index = 0; index < left.length; index++) difference |= left.charCodeAt(index) ^ right.charCodeAt(index);
  return difference === 0;
}

/** `Authorization: Bearer sk-…`; anything else is no key at all. */
export function bearerKey(authorization: string | null): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  return match?.[1] ?? null;
}
