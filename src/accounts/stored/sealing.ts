/**
 * Content the worker hands a client to give back unread: a compaction's summary
 * (`/v1/responses/compact`). Sealed with AES-GCM under a key kept in the origin's database
 * (made once, never readable through the API) and bound to the account, so a client can neither
 * read, forge nor alter it, nor replay another account's.
 */
import type { AccountsDatabase } from "../database.js";

const keyName = "compaction";
const ivBytes = 12;

function base64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  return Uint8Array.from(binary, (character) => character.charCodeAt(0));
}

export class Sealing {
  readonly #database: Promise<AccountsDatabase>;
  #key: Promise<CryptoKey> | undefined;

  constructor(options: { database: AccountsDatabase | Promise<AccountsDatabase> }) {
    this.#database = Promise.resolve(options.database);
  }

  /** The origin's key: read, or made and kept (the first of two workers to keep one wins). */
  #keyOf(): Promise<CryptoKey> {
    this.#key ??= (async () => {
      const database = await this.#database;
      const kept = await database.get("secrets", keyName);
      if (kept) return kept.key;
      const key = await crypto.subtle.generateKey({ name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
      try {
        await database.add("secrets", { name: keyName, key });
        return key;
      } catch {
        return (await database.get("secrets", keyName))!.key;
      }
    })().catch((error: unknown) => {
      this.#key = undefined;
      throw error;
    });
    return this.#key;
  }

  /** `text`, sealed for `accountId`. */
  async seal(accountId: string, text: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(ivBytes));
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(accountId) },
      await this.#keyOf(),
      new TextEncoder().encode(text),
    );
    const bytes = new Uint8Array(ivBytes + sealed.byteLength);
    bytes.set(iv);
    bytes.set(new Uint8Array(sealed), ivBytes);
    return base64Url(bytes);
  }

  /** The text sealed for `accountId`; null when it is not one (another account's, another origin's, or altered). */
  async open(accountId: string, sealed: string): Promise<string | null> {
    const bytes = fromBase64Url(sealed);
    if (!bytes || bytes.length <= ivBytes) return null;
    try {
      const opened = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: bytes.subarray(0, ivBytes), additionalData: new TextEncoder().encode(accountId) },
        await this.#keyOf(),
        bytes.subarray(ivBytes),
      );
      return new TextDecoder().decode(opened);
    } catch {
      return null;
    }
  }
}
