/** The benchmarks' statistics, one definition each. */

/** The median: the middle value, or the mean of the two middle ones (an even count). */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2
    ? sorted[(sorted.length - 1) / 2]
    : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
}

/** The nearest-rank percentile. */
export function percentile(values, fraction) {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))];
}

/**
 * A distribution-free interval for the median, from order statistics: [x(k), x(n+1−k)] holds the
 * true median with probability 1 − 2·P(Binomial(n, ½) < k). The narrowest with at least 95%
 * coverage, or null when there are too few samples for one (fewer than 6).
 */
export function medianInterval(values) {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  const count = sorted.length;
  let k = 0;
  let combinations = 1;
  let tail = 0;
  for (let candidate = 1; candidate <= Math.floor(count / 2); candidate++) {
    // combinations = C(count, candidate − 1); tail = P(Binomial(count, ½) ≤ candidate − 1).
    tail += combinations / 2 ** count;
    if (2 * tail > 0.05) break;
    k = candidate;
    combinations = (combinations * (count - candidate + 1)) / candidate;
  }
  return k === 0 ? null : [sorted[k - 1], sorted[count - k]];
}
