/** `value` as an absolute URL: kept when it is one, else resolved against the folder `base`. */
export function resolveUrl(value: string, base: string): string {
  return /^[a-z][a-z0-9+.-]*:/i.test(value) ? value : new URL(value, base.endsWith("/") ? base : `${base}/`).href;
}
