/**
 * The usage chart: tokens per day, stacked by model, with axes, units, a legend that reads out
 * the values under the pointer, and the totals in words. Drawn by uPlot (MIT, about 50 KB): a
 * small, fast canvas chart with real axes and a live legend, which the hand-drawn SVG lacked.
 * Its labels are CSS pixels at the figure's own width, so they stay legible on a phone.
 */
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { LedgerEntry } from "../src/index.js";

const palette = ["#2f5bd3", "#b45309", "#047857", "#b42318", "#7e22ce", "#0e7490"];
/** uPlot's time scale counts seconds. */
const daySeconds = 86_400;
const isoDay = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);

/** Tokens per day and model (days in epoch seconds, UTC), and the cost of those days in nano-USD. */
function perDay(charges: readonly LedgerEntry[]) {
  const day = (entry: LedgerEntry) => Math.floor(entry.createdAt / 1000 / daySeconds) * daySeconds;
  const days = [...new Set(charges.map(day))].sort((a, b) => a - b).slice(-14);
  const models = [...new Set(charges.map((entry) => entry.model!))];
  const tokensOf = (model: string, date: number) =>
    charges
      .filter((entry) => entry.model === model && day(entry) === date)
      .reduce((sum, entry) => sum + (entry.promptTokens ?? 0) + (entry.completionTokens ?? 0), 0);
  const tokens = models.map((model) => days.map((date) => tokensOf(model, date)));
  const cost = charges
    .filter((entry) => days.includes(day(entry)))
    .reduce((sum, entry) => sum + entry.amountNanoUsd, 0);
  return { days, models, tokens, cost };
}

/** Draws into `figure`, replacing what was there; returns the chart so the caller can destroy it. */
export function renderUsageChart(
  figure: HTMLElement,
  ledger: readonly LedgerEntry[],
  previous?: uPlot,
): uPlot | undefined {
  previous?.destroy();
  const charges = ledger.filter((entry) => entry.kind === "charge" && entry.model);
  if (charges.length === 0) {
    figure.replaceChildren("No usage yet: send a message in Chat.");
    return undefined;
  }
  const { days, models, tokens, cost } = perDay(charges);
  // Stacked: each model is drawn at its running total, the last model first, so every bar shows.
  const running = tokens.map((_, index) =>
    days.map((__, day) => tokens.slice(0, index + 1).reduce((sum, series) => sum + series[day]!, 0)),
  );
  const total = running.at(-1)!.reduce((sum, value) => sum + value, 0);
  const caption = document.createElement("figcaption");
  caption.textContent = `${total.toLocaleString("en-US")} tokens and $${(cost / 1e9).toFixed(9)} over the last ${days.length} day(s) with usage, by model.`;
  const plot = document.createElement("div");
  figure.replaceChildren(plot, caption);
  const order = models.map((_, index) => index).reverse();
  const chart = new uPlot(
    chartOptions(figure, days, models, tokens, order),
    [days.map((_, index) => index), ...order.map((index) => running[index]!)],
    plot,
  );
  // The legend shows the latest day until the pointer picks another.
  chart.setLegend({ idx: days.length - 1 });
  const canvas = plot.querySelector("canvas");
  canvas?.setAttribute("role", "img");
  canvas?.setAttribute("aria-label", caption.textContent);
  return chart;
}

/** The chart's axes and series: evenly spaced day slots, and one stacked bar series per model. */
function chartOptions(
  figure: HTMLElement,
  days: readonly number[],
  models: readonly string[],
  tokens: readonly number[][],
  order: readonly number[],
): uPlot.Options {
  const bars = uPlot.paths.bars!({ size: [0.6, 64] });
  return {
    width: Math.max(280, figure.clientWidth || 640),
    height: 260,
    // Days are evenly spaced slots (a day without usage has no slot), labelled with their date.
    scales: {
      x: { time: false, range: () => [-0.6, days.length - 0.4] },
      y: { range: (_, __, max) => [0, Math.max(10, max * 1.1)] },
    },
    axes: [
      {
        stroke: "currentColor",
        grid: { show: false },
        incrs: [1],
        values: (_, splits) =>
          splits.map((split) =>
            Number.isInteger(split) && days[split] !== undefined ? isoDay(days[split]!).slice(5) : "",
          ),
      },
      {
        stroke: "currentColor",
        label: "Tokens",
        size: 64,
        values: (_, splits) => splits.map((split) => split.toLocaleString("en-US")),
      },
    ],
    series: [
      {
        label: "Day (UTC)",
        value: (_, value) => (value === null || days[value] === undefined ? "—" : isoDay(days[value]!)),
      },
      ...order.map((index) => ({
        label: models[index]!,
        stroke: palette[index % palette.length]!,
        fill: palette[index % palette.length]!,
        paths: bars,
        points: { show: false },
        // The legend reads out this model's own tokens, not the running total it is drawn at.
        value: (_: uPlot, __: number | null, ___: number, dataIndex: number | null) =>
          dataIndex === null ? "—" : `${tokens[index]![dataIndex]!.toLocaleString("en-US")} tokens`,
      })),
    ],
  };
}
