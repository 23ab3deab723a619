import { routeBuckets, serverLatencyBetween } from "../../scripts/soak/server-latency";

const metrics = (listing200: number[], listing304: number[]) =>
  [
    "# HELP http_request_duration_seconds Time from request to the last byte of the response.",
    "# TYPE http_request_duration_seconds histogram",
    ...["0.025", "0.05", "0.1", "+Inf"].map((le, i) => `http_request_duration_seconds_bucket{le="${le}",route="/v1/datasets",method="GET",status="200"} ${listing200[i]}`),
    ...["0.025", "0.05", "0.1", "+Inf"].map((le, i) => `http_request_duration_seconds_bucket{le="${le}",route="/v1/datasets",method="GET",status="304"} ${listing304[i]}`),
    'http_request_duration_seconds_bucket{le="0.05",route="/v1/datasets/:dataset/csv",method="GET",status="200"} 999',
    'http_request_duration_seconds_sum{route="/v1/datasets",method="GET",status="200"} 3.5',
  ].join("\n");

describe("the gateway's listing latency from its histogram", () => {
  it("sums one route's buckets over statuses and leaves other routes and series out", () => {
    const b = routeBuckets(metrics([10, 18, 20, 20], [100, 100, 100, 100]), "/v1/datasets");
    expect([...b.entries()]).toEqual([
      [0.025, 110],
      [0.05, 118],
      [0.1, 120],
      [Infinity, 120],
    ]);
  });

  it("judges the requests between two readings only", () => {
    const before = routeBuckets(metrics([10, 18, 20, 20], [100, 100, 100, 100]), "/v1/datasets");
    // 400 more requests: 396 within 25 ms, 2 more within 50 ms, 2 slower than 100 ms.
    const after = routeBuckets(metrics([10, 20, 22, 24], [496, 496, 496, 496]), "/v1/datasets");
    const s = serverLatencyBetween(before, after, 0.05);
    expect(s.requests).toBe(400);
    expect(s.shareWithin).toBeCloseTo(398 / 400);
    // 99 % of 400 is 396: the 25 ms bucket already holds them.
    expect(s.p99AtMostSeconds).toBe(0.025);
    const slow = serverLatencyBetween(null, routeBuckets(metrics([0, 0, 0, 10], [0, 0, 0, 0]), "/v1/datasets"), 0.05);
    expect(slow).toEqual({ requests: 10, shareWithin: 0, withinSeconds: 0.05, p99AtMostSeconds: Infinity });
  });

  it("has nothing to judge without requests", () => {
    const b = routeBuckets(metrics([1, 1, 1, 1], [0, 0, 0, 0]), "/v1/datasets");
    expect(serverLatencyBetween(b, b, 0.05)).toEqual({ requests: 0, shareWithin: null, withinSeconds: 0.05, p99AtMostSeconds: null });
  });
});
