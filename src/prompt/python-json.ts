/**
 * JSON as Python's `json.dumps(value, ensure_ascii=False)` writes it, which is what the official
 * chat templates produce (Jinja's `tojson`, mistral-common): `", "` between items and `": "` after
 * keys, or with `indent`, one item per line. Strings escape as in `JSON.stringify`, which matches
 * Python with `ensure_ascii=False`. Numbers follow JavaScript's shortest form with Python's
 * two-digit exponents (`1e-07`); a float Python would print as `1.0` has no JavaScript twin, as
 * the value was parsed into a JavaScript number.
 */
export function pythonJson(value: unknown, indent?: number): string {
  return write(value, indent, "");
}

function number(value: number): string {
  if (!Number.isFinite(value)) return "null";
  return String(value).replace(/e([+-])(\d)$/, "e$10$2");
}

function write(value: unknown, indent: number | undefined, outer: string): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "number") return number(value);
  if (typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  const inner = indent === undefined ? "" : outer + " ".repeat(indent);
  const open = indent === undefined ? "" : `\n${inner}`;
  const between = indent === undefined ? ", " : `,\n${inner}`;
  const close = indent === undefined ? "" : `\n${outer}`;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[${open}${value.map((item) => write(item, indent, inner)).join(between)}${close}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined);
  if (entries.length === 0) return "{}";
  return `{${open}${entries.map(([key, item]) => `${JSON.stringify(key)}: ${write(item, indent, inner)}`).join(between)}${close}}`;
}
