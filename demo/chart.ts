/**
 * The usage chart: tokens per day, stacked by model, with each day's cost written above its
 * bar. Plain SVG, so it needs no library and works offline.
 */
import type { LedgerEntry } from "../src/index.js";

const palette = ["#3b6cf6", "#f5a623", "#2bb673", "#d0021b", "#9013fe", "#50e3c2"];
const svgNamespace = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(svgNamespace, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

export function renderUsageChart(figure: HTMLElement, ledger: readonly LedgerEntry[]): void {
  const charges = ledger.filter((entry) => entry.kind === "charge" && entry.model);
  if (charges.length === 0) {
    figure.replaceChildren("No usage yet: send a message in Chat.");
    return;
  }
  const day = (entry: LedgerEntry) => new Date(entry.createdAt).toISOString().slice(0, 10);
  const days = [...new Set(charges.map(day))].sort().slice(-14);
  const models = [...new Set(charges.map((entry) => entry.model!))];
  const tokens = new Map<string, number>();
  const cost = new Map<string, number>();
  for (const entry of charges) {
    const key = `${day(entry)}|${entry.model}`;
    tokens.set(key, (tokens.get(key) ?? 0) + (entry.promptTokens ?? 0) + (entry.completionTokens ?? 0));
    cost.set(day(entry), (cost.get(day(entry)) ?? 0) + entry.amountNanoUsd);
  }
  const totals = days.map((date) => models.reduce((sum, model) => sum + (tokens.get(`${date}|${model}`) ?? 0), 0));
  const highest = Math.max(1, ...totals);
  const width = 640;
  const height = 240;
  const top = 28;
  const bottom = 36;
  const slot = width / days.length;
  const barWidth = Math.min(56, slot * 0.6);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `Tokens per day for the last ${days.length} day(s), by model` });
  days.forEach((date, index) => {
    let y = height - bottom;
    const x = index * slot + (slot - barWidth) / 2;
    models.forEach((model, modelIndex) => {
      const value = tokens.get(`${date}|${model}`) ?? 0;
      if (!value) return;
      const barHeight = (value / highest) * (height - top - bottom);
      y -= barHeight;
      const bar = svg("rect", { x, y, width: barWidth, height: barHeight, fill: palette[modelIndex % palette.length]!, rx: 3 });
      bar.append(Object.assign(svg("title", {}), { textContent: `${date} · ${model}: ${value} tokens` }));
      chart.append(bar);
    });
    const label = svg("text", { x: x + barWidth / 2, y: height - bottom + 16, "text-anchor": "middle", "font-size": 11, fill: "currentColor" });
    label.textContent = date.slice(5);
    const amount = svg("text", { x: x + barWidth / 2, y: y - 6, "text-anchor": "middle", "font-size": 11, fill: "currentColor" });
    amount.textContent = `${totals[index]} tok · $${((cost.get(date) ?? 0) / 1e9).toFixed(6)}`;
    chart.append(label, amount);
  });
  const legend = document.createElement("figcaption");
  legend.className = "legend";
  models.forEach((model, index) => {
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = palette[index % palette.length]!;
    item.append(swatch, model);
    legend.append(item);
  });
  figure.replaceChildren(chart, legend);
}
