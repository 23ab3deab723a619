import { rssGrowth, type RssSample } from "../../scripts/soak/memory-growth";

const MB = 2 ** 20;

/** A run sampled every 10 s; `rss(t)` in MB for one service. */
function run(rss: (t: number) => number, minutes = 30): RssSample[] {
  const samples: RssSample[] = [];
  for (let t = 0; t <= minutes * 60; t += 10) samples.push({ t, services: [{ service: "schema", rssBytes: rss(t) * MB }] });
  return samples;
}

/** A saw-tooth: `floor` MB after each full collection (one at minute 5, then every `period` s), rising 0.05 MB/s in between. */
const sawTooth = (period: number, floor = 140) => (t: number) => floor + 0.05 * ((((t - 300) % period) + period) % period);

describe("the soak's RSS rule (floors of the two halves after minute 5, not single samples)", () => {
  it("passes a saw-tooth of a 15-minute period whose single samples differ by 30 %", () => {
    // Minute 5 falls on a collection (140 MB), the end 600 s after one (170 MB).
    const [m] = rssGrowth(run(sawTooth(900)), ["schema"], 300);
    expect(m.baselineMinute).toBe(5);
    expect(m.windowSeconds).toBe(750);
    expect(m.sampleGrowthPercent!).toBeGreaterThan(10);
    expect(m.growthPercent!).toBeLessThanOrEqual(10);
    expect(m.baselineFloorBytes).toBe(140 * MB);
  });

  it("fails a leak that raises the floor", () => {
    // The same saw-tooth over a floor that climbs 1.5 MB a minute: the second half's floor +15 %.
    const [m] = rssGrowth(run((t) => sawTooth(900, 140 + (1.5 * t) / 60)(t)), ["schema"], 300);
    expect(m.growthPercent!).toBeGreaterThan(10);
  });

  it("fails garbage outside the heap that a full collection returns only after the run", () => {
    // The catalog before its listing fix: +2.5 MB a minute, no collection in 30 minutes.
    const [m] = rssGrowth(run((t) => 130 + (2.5 * t) / 60), ["schema"], 300);
    expect(m.growthPercent!).toBeGreaterThan(10);
  });

  it("splits a short run the same way: the middle as the baseline, its two halves after", () => {
    const short = run((t) => 100 + t, 1); // rising steadily through a 60-second run
    const [m] = rssGrowth(short, ["schema"], 30);
    expect(m.windowSeconds).toBe(15);
    // Floors: the lowest of t 30..45 (130) against the lowest of t 45..60 (150).
    expect(m.baselineFloorBytes).toBe(130 * MB);
    expect(m.endFloorBytes).toBe(150 * MB);
  });

  it("reports nothing for a service it never sampled", () => {
    const [m] = rssGrowth(run(() => 100), ["catalog"], 300);
    expect(m.growthPercent).toBeNull();
  });
});
