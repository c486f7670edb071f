/** The UTF-8 length of `value`'s JSON: what a stored record counts against its account's storage quota. */
export function jsonBytes(value: unknown): number {
  const text = JSON.stringify(value) ?? "";
  let bytes = text.length;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    // One UTF-16 unit is 1 to 3 bytes; a surrogate pair (two units) is 4.
    if (code >= 0x800 && (code < 0xd800 || code > 0xdfff)) bytes += 2;
    else if (code >= 0x80) bytes += 1;
  }
  return bytes;
}
