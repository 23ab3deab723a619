import { rssGrowth, rssWindowSeconds, type RssSample } from "../../scripts/soak/memory-growth";

const MB = 2 ** 20;

/** A 30-minute run sampled every 10 s; `rss(t)` in MB for one service. */
function run(rss: (t: number) => number, minutes = 30): RssSample[] {
  const samples: RssSample[] = [];
  for (let t = 0; t <= minutes * 60; t += 10) samples.push({ t, services: [{ service: "export", rssBytes: rss(t) * MB }] });
  return samples;
}

/** A saw-tooth: 150 MB after each collection, rising 0.5 MB/s until the next one every `period` s. */
const sawTooth = (period: number, floor = 150) => (t: number) => floor + 0.5 * (t % period);

describe("the soak's RSS rule (floors, not single samples)", () => {
  it("passes a saw-tooth whose single samples differ by 40 %", () => {
    // Minute 5 (t = 300) falls 10 s after a collection (155 MB), the end 60 s after one (180 MB).
    const [m] = rssGrowth(run(sawTooth(145)), ["export"], 300);
    expect(m.baselineMinute).toBe(5);
    expect(m.sampleGrowthPercent!).toBeGreaterThan(10);
    expect(m.growthPercent!).toBeLessThanOrEqual(10);
    expect(m.baselineFloorBytes).toBe(150 * MB);
  });

  it("fails a leak that raises the floor", () => {
    // The same saw-tooth over a floor that climbs 1 MB a minute: +25 MB by the end, +16 %.
    const [m] = rssGrowth(run((t) => sawTooth(145, 150 + t / 60)(t)), ["export"], 300);
    expect(m.growthPercent!).toBeGreaterThan(10);
  });

  it("compares windows of equal length, four minutes on a long run and a third of the baseline's time on a short one", () => {
    expect(rssWindowSeconds(300)).toBe(200);
    expect(rssWindowSeconds(3000)).toBe(240);
    expect(rssWindowSeconds(30)).toBe(20);
    const short = run((t) => 100 + t, 1); // rising steadily through a 60-second run
    const [m] = rssGrowth(short, ["export"], 30);
    // Floors: the lowest of t 20..40 (120) against the lowest of t 40..60 (140).
    expect(m.baselineFloorBytes).toBe(120 * MB);
    expect(m.endFloorBytes).toBe(140 * MB);
  });

  it("reports nothing for a service it never sampled", () => {
    const [m] = rssGrowth(run(() => 100), ["catalog"], 300);
    expect(m.growthPercent).toBeNull();
  });
});
