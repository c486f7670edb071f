/**
 * String `format`s: each is written as a pattern the grammar and the sampler share (`written`),
 * chosen to satisfy RFC 3339, 5321, 1123 and 4122 and also the stricter readings of the common
 * validators (ajv-formats, zod's patterns, pydantic): UTC date-times with seconds, version-4
 * UUIDs, days that exist in every year. `accepted` is the wider check of a finished value.
 */
const monthDay =
  "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))";
const date = `[12]\\d{3}-${monthDay}`;
const clock = "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,6})?";
const label = "[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?";
const octet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const hextet = "[0-9a-f]{1,4}";
const timePart = "T(?:\\d+H(?:\\d+M)?(?:\\d+S)?|\\d+M(?:\\d+S)?|\\d+S)";

/** The strings we write for each format. */
export const writtenFormats: Record<string, string> = {
  "date-time": `^${date}T${clock}Z$`,
  date: `^${date}$`,
  time: `^${clock}Z$`,
  duration: `^P(?:(?:\\d+Y(?:\\d+M)?(?:\\d+D)?|\\d+M(?:\\d+D)?|\\d+D)(?:${timePart})?|${timePart}|\\d+W)$`,
  email: `^[a-z0-9_+-]+(?:\\.[a-z0-9_+-]+)*@(?:${label}\\.){1,3}[a-z]{2,12}$`,
  hostname: `^${label}(?:\\.${label}){0,3}$`,
  ipv4: `^${octet}(?:\\.${octet}){3}$`,
  ipv6: `^(?:(?:${hextet}:){7}${hextet}|(?:${hextet}:){1,6}:${hextet}|::1)$`,
  uuid: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
  // pydantic's UUID1, UUID3, UUID4 and UUID5.
  ...Object.fromEntries(
    [1, 3, 4, 5].map((version) => [
      `uuid${version}`,
      `^[0-9a-f]{8}-[0-9a-f]{4}-${version}[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`,
    ]),
  ),
  uri: `^https://${label}(?:\\.${label}){0,3}(?:/[A-Za-z0-9._~-]*){0,6}$`,
  // pydantic's own names: any text (bytes, a secret, a path), and an address of either kind.
  binary: "^[\\s\\S]*$",
  password: "^[\\s\\S]*$",
  path: "^[\\s\\S]*$",
  ipvanyaddress: `^(?:${octet}(?:\\.${octet}){3}|(?:${hextet}:){7}${hextet})$`,
};

function parsesAsUrl(value: string): boolean {
  try {
    new URL(value);
    return true;
  } catch {
    return false;
  }
}

function isIpv6(value: string): boolean {
  return /^[0-9a-fA-F:.]+$/.test(value) && value.includes(":") && parsesAsUrl(`http://[${value}]/`);
}

const accepted: Record<string, (value: string) => boolean> = {
  "date-time": (value) =>
    /^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$/.test(value) && !Number.isNaN(Date.parse(value)),
  date: (value) => /^\d{4}-\d\d-\d\d$/.test(value) && !Number.isNaN(Date.parse(`${value}T00:00:00Z`)),
  time: (value) => /^\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:?\d\d)?$/.test(value),
  duration: (value) => /^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$/.test(value),
  // Each check reads a value once: no two ways to match the same text, so no backtracking blow-up.
  email: (value) => /^[^\s@"]+@[^\s@.]+(\.[^\s@.]+)+$/.test(value),
  hostname: (value) =>
    value.length <= 253 &&
    /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(value),
  ipv4: (value) => new RegExp(`^${octet}(?:\\.${octet}){3}$`).test(value),
  ipv6: isIpv6,
  uuid: (value) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value),
  uri: (value) => /^[A-Za-z][A-Za-z0-9+.-]*:\S*$/.test(value) && parsesAsUrl(value),
  ...Object.fromEntries(
    [1, 3, 4, 5].map((version) => [
      `uuid${version}`,
      (value: string) =>
        new RegExp(`^[0-9a-f]{8}-[0-9a-f]{4}-${version}[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, "i").test(value),
    ]),
  ),
  binary: () => true,
  password: () => true,
  path: () => true,
  ipvanyaddress: (value) => accepted.ipv4!(value) || isIpv6(value),
};

export function formatNames(): string[] {
  return Object.keys(writtenFormats);
}

export function knownFormat(format: string): boolean {
  return Object.hasOwn(writtenFormats, format);
}

/** Whether a finished value has the format. */
export function hasFormat(format: string, value: string): boolean {
  return Object.hasOwn(accepted, format) ? accepted[format]!(value) : true;
}
