import { metricsText } from "../soak/resources";

/**
 * Pages of resource datasets and deviations by how the export read them (its
 * export_rendered_dataset_pages_total by source), and `replanned`: those planned again because the
 * rendered state moved between their plan and their statement (export_rendered_dataset_page_replans_total).
 */
export type RenderedPageCounts = Record<string, number>;

const SAMPLE = /^export_rendered_dataset_page(?:s_total\{source="([a-z]+)"\}|(_replans)_total) ([0-9.e+]+)$/gm;

/**
 * Follows the export service's page counter by source across the run's faults: each sample adds what
 * the counter grew by since the last one, or all of it when it fell (the process was restarted and
 * counts from 0 again). What a killed process counted after its last sample is not seen, so the
 * totals are lower bounds.
 */
export class RenderedPagesFollower {
  readonly totals: RenderedPageCounts = {};
  private readonly last: RenderedPageCounts = {};
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly metricsPort: number) {}

  async sample(): Promise<void> {
    let text: string;
    try {
      text = await metricsText(this.metricsPort);
    } catch {
      return; // the export service is down (a fault): the next sample catches up
    }
    for (const [, pageSource, replans, raw] of text.matchAll(SAMPLE)) {
      const source = replans ? "replanned" : pageSource;
      const value = Number(raw);
      const previous = this.last[source] ?? 0;
      this.totals[source] = (this.totals[source] ?? 0) + (value >= previous ? value - previous : value);
      this.last[source] = value;
    }
  }

  start(intervalMs = 1000): void {
    this.timer = setInterval(() => void this.sample(), intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<RenderedPageCounts> {
    clearInterval(this.timer);
    await this.sample();
    return { ...this.totals };
  }
}
