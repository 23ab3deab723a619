import { buildConfigSchema, createLogger, createMetrics, parseConfig, ServiceLifecycle, type LifecycleSettings, type ServiceListener } from "../src";

const log = createLogger("lifecycle-test", "silent");
const SETTINGS: LifecycleSettings = { ...parseConfig(buildConfigSchema, { IMAGE_TAG: "1.2.3", GIT_COMMIT: "abc" }), SHUTDOWN_GRACE_MS: 1_234 };

/** A lifecycle whose listener, pool and held things record what happens to them, in order. */
function recorded(settings: LifecycleSettings = SETTINGS, listen: () => Promise<Record<string, unknown>> = async () => ({ port: 1 })) {
  const events: string[] = [];
  const lifecycle = new ServiceLifecycle({ name: "test", log, settings, host: "127.0.0.1", createMetrics: (options) => createMetrics({ ...options, defaultMetrics: false }) });
  lifecycle.holdPool({ totalCount: 2, idleCount: 1, waitingCount: 0, end: async () => void events.push("pool.end") });
  lifecycle.hold(() => void events.push("store.close"));
  lifecycle.hold(() => void events.push("client.close"));
  const listener: ServiceListener = {
    listen: async () => {
      events.push("listen");
      return listen();
    },
    drain: async (graceMs) => void events.push(`drain ${graceMs}`),
    abort: () => void events.push("abort"),
  };
  return { events, lifecycle, listener };
}

describe("ServiceLifecycle", () => {
  it("reads the build once from the configuration and exports it as build_info", async () => {
    const { lifecycle } = recorded();
    expect(lifecycle.build).toMatchObject({ imageTag: "1.2.3", commit: "abc" });
    expect(await lifecycle.metrics.registry.metrics()).toMatch(/build_info\{image_tag="1\.2\.3",commit="abc",version="[^"]+"\} 1/);
  });

  it("starts in order (listener, /metrics, background work, ready) and stops in order, once", async () => {
    const { events, lifecycle, listener } = recorded({ ...SETTINGS, METRICS_PORT: 0 });
    const started = await lifecycle.start({
      listener,
      startBackgroundWork: async () => {
        events.push("background.start");
        return { stop: async () => void events.push("background.stop") };
      },
      ready: () => void events.push("ready"),
    });
    expect(started.metricsPort).toEqual(expect.any(Number));
    const scrape = await fetch(`http://127.0.0.1:${started.metricsPort}/metrics`);
    expect(await scrape.text()).toContain('db_pool_connections{pool="main",state="total"} 2');
    expect(events).toEqual(["listen", "background.start", "ready"]);

    const first = started.stop();
    expect(started.stop()).toBe(first);
    expect(lifecycle.stop()).toBe(first);
    await first;
    expect(events.slice(3)).toEqual(["drain 1234", "background.stop", "client.close", "store.close", "pool.end"]);
    // /metrics closes last.
    await expect(fetch(`http://127.0.0.1:${started.metricsPort}/metrics`)).rejects.toThrow();
  });

  it("goes on past a step that fails and then rejects with that failure", async () => {
    const { events, lifecycle, listener } = recorded();
    const failure = new Error("client would not close");
    lifecycle.hold(() => Promise.reject(failure));
    const started = await lifecycle.start({ listener });
    await expect(started.stop()).rejects.toBe(failure);
    expect(events).toEqual(["listen", "drain 1234", "client.close", "store.close", "pool.end"]);
  });

  it("releases everything held and rethrows when the listener cannot bind", async () => {
    const { events, lifecycle, listener } = recorded(SETTINGS, async () => {
      throw new Error("EADDRINUSE");
    });
    const background = jest.fn();
    await expect(lifecycle.start({ listener, startBackgroundWork: background })).rejects.toThrow("EADDRINUSE");
    expect(background).not.toHaveBeenCalled();
    expect(events).toEqual(["listen", "abort", "client.close", "store.close", "pool.end"]);
    // A stop after a failed start releases nothing twice.
    await lifecycle.stop();
    expect(events).toHaveLength(5);
  });

  it("releases everything and closes /metrics when the background work fails to start", async () => {
    const { events, lifecycle, listener } = recorded({ ...SETTINGS, METRICS_PORT: 0 });
    await expect(
      lifecycle.start({
        listener,
        startBackgroundWork: async () => {
          throw new Error("no queue");
        },
      }),
    ).rejects.toThrow("no queue");
    expect(events).toEqual(["listen", "abort", "client.close", "store.close", "pool.end"]);
  });
});
