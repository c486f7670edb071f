/**
 * OpenAI's list endpoints: their query read from the URL, and a cursor page of a list held in
 * memory (`{object: "list", data, first_id, last_id, has_more}`).
 */

/** A list's place: a cursor (the id of the item before the page), a size and an order. */
export interface PageQuery {
  after?: string | undefined;
  limit: number;
  order: "asc" | "desc";
}

export interface Page<Item> {
  object: "list";
  data: Item[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/**
 * A list query as its schema reads it: `limit` a number when it is written as one, `include` or
 * `include[]` repeated, `metadata[key]=value` as an object (`__proto__` an ordinary key).
 */
export function listQueryOf(url: URL): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  for (const name of ["after", "before", "limit", "order", "model", "purpose", "filter"]) {
    const value = url.searchParams.get(name);
    if (value !== null) query[name] = name === "limit" && /^-?\d{1,16}$/.test(value) ? Number(value) : value;
  }
  const include = [...url.searchParams.getAll("include"), ...url.searchParams.getAll("include[]")];
  if (include.length) query.include = include;
  const metadata = [...url.searchParams].flatMap(([name, value]) => {
    const key = /^metadata\[(.*)\]$/s.exec(name)?.[1];
    return key === undefined ? [] : [[key, value] as const];
  });
  if (metadata.length) query.metadata = Object.fromEntries(metadata);
  return query;
}

/** The page's fields for `data`, which is followed by more when `hasMore`. */
export function pageOf<Item extends { id: string }>(data: Item[], hasMore: boolean): Page<Item> {
  return { object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: hasMore };
}

/** One page of `items` in the query's order, after its cursor; `missing` is thrown when the cursor names no item. */
export function cursorPage<Item extends { id: string }>(
  items: readonly Item[],
  query: PageQuery,
  missing: (after: string) => Error,
): Page<Item> {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const after = query.after;
    const index = ordered.findIndex((item) => item.id === after);
    if (index < 0) throw missing(after);
    start = index + 1;
  }
  return pageOf(ordered.slice(start, start + query.limit), start + query.limit < ordered.length);
}
