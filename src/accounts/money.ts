import { SetupError } from "../core/errors/setup.js";

/** Money is integer nano-USD: 1 USD = 10⁹ nano-USD, well inside Number.MAX_SAFE_INTEGER for any real balance. */
const nanoPerUsd = 1_000_000_000;

export function usdToNano(usd: number): number {
  if (!Number.isFinite(usd) || usd < 0)
    throw new SetupError("invalid_option", `an amount of USD must be a finite, non-negative number; got ${usd}`);
  const nano = Math.round(usd * nanoPerUsd);
  if (!Number.isSafeInteger(nano))
    throw new SetupError("invalid_option", `${usd} USD is too large to count in nano-USD`);
  return nano;
}

export interface Price {
  inputNanoUsdPerToken: number;
  outputNanoUsdPerToken: number;
}

export function costNano(price: Price, promptTokens: number, completionTokens: number): number {
  return promptTokens * price.inputNanoUsdPerToken + completionTokens * price.outputNanoUsdPerToken;
}

/** An amount as a person reads it: USD to the nano-dollar, "$0.000001100". */
export function formatUsd(nano: number): string {
  const sign = nano < 0 ? "-" : "";
  const whole = Math.abs(nano);
  return `${sign}$${Math.floor(whole / nanoPerUsd)}.${String(whole % nanoPerUsd).padStart(9, "0")}`;
}
