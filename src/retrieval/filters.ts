/**
 * A search's `filters` over a file's attributes, as OpenAI defines them: a comparison of one
 * attribute with a value (`eq ne gt gte lt lte in nin`), or `and`/`or` of filters. An attribute
 * the file lacks matches only `ne` and `nin`. Order comparisons hold between two numbers or two
 * strings, never across types. Work is linear in the filter.
 */
import type { ComparisonFilter, FileAttributes, SearchFilter } from "../core/wire/vector-stores.js";

type Attribute = FileAttributes[string];

function ordered(attribute: Attribute, value: ComparisonFilter["value"]): number | undefined {
  if (typeof attribute === "number" && typeof value === "number") return attribute - value;
  if (typeof attribute === "string" && typeof value === "string")
    return attribute < value ? -1 : attribute > value ? 1 : 0;
  return undefined;
}

function compares(filter: ComparisonFilter, attributes: FileAttributes): boolean {
  const has = Object.hasOwn(attributes, filter.key);
  const attribute = has ? attributes[filter.key] : undefined;
  const { value } = filter;
  switch (filter.type) {
    case "eq":
      return has && attribute === value;
    case "ne":
      return !has || attribute !== value;
    case "in":
      return has && Array.isArray(value) && value.some((each) => each === attribute);
    case "nin":
      return !has || !Array.isArray(value) || !value.some((each) => each === attribute);
    default: {
      const difference = attribute === undefined ? undefined : ordered(attribute, value);
      if (difference === undefined) return false;
      if (filter.type === "gt") return difference > 0;
      if (filter.type === "gte") return difference >= 0;
      if (filter.type === "lt") return difference < 0;
      return difference <= 0;
    }
  }
}

export function matchesFilter(filter: SearchFilter, attributes: FileAttributes): boolean {
  if ("filters" in filter)
    return filter.type === "and"
      ? filter.filters.every((each) => matchesFilter(each, attributes))
      : filter.filters.some((each) => matchesFilter(each, attributes));
  return compares(filter, attributes);
}
