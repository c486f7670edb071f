/**
 * A duration as OpenAI writes one in its rate-limit headers and messages: Go's form ("84ms",
 * "1.146s", "1m0s"), which clients parse as such (go-openai with `time.ParseDuration`, others
 * from "Please try again in …").
 */
export function durationText(milliseconds: number): string {
  const whole = Math.max(0, Math.ceil(milliseconds));
  if (whole === 0) return "0s";
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const seconds = `${(whole % 60_000) / 1000}s`;
  if (hours) return `${hours}h${minutes}m${seconds}`;
  return minutes ? `${minutes}m${seconds}` : seconds;
}
