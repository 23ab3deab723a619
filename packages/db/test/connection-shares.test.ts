import { ConnectionShares, ShareWaitAbandoned, ShareWaitTimeout, type ShareLease } from "../src/connection-shares";

const LONG = 60_000;

describe("ConnectionShares", () => {
  it("caps one organization below the pool, leaving shares for the others", async () => {
    const shares = new ConnectionShares({ capacity: 10, perOrganization: 4 });
    const a = await Promise.all(Array.from({ length: 4 }, () => shares.acquire("a", { timeoutMs: LONG })));
    const b = await Promise.all(Array.from({ length: 4 }, () => shares.acquire("b", { timeoutMs: LONG })));
    // a's fifth waits although shares are free; c is served at once.
    let fifth: ShareLease | undefined;
    void shares.acquire("a", { timeoutMs: LONG }).then((l) => (fifth = l));
    const c = await shares.acquire("c", { timeoutMs: LONG });
    await Promise.resolve();
    expect(fifth).toBeUndefined();
    expect(shares.status()).toMatchObject({ held: 9, waiting: 1, byOrganization: { a: 4, b: 4, c: 1 } });
    a[0].release();
    await new Promise((r) => setImmediate(r));
    expect(fifth).toBeDefined();
    for (const l of [...a, ...b, c, fifth!]) l.release();
    expect(shares.status()).toEqual({ held: 0, waiting: 0, byOrganization: {} });
  });

  it("gives a freed share to the waiting organization holding the fewest, then the oldest waiter", async () => {
    const shares = new ConnectionShares({ capacity: 3, perOrganization: 3 });
    const a = await Promise.all([1, 2, 3].map(() => shares.acquire("a", { timeoutMs: LONG })));
    const order: string[] = [];
    const waitFor = (org: string) => shares.acquire(org, { timeoutMs: LONG }).then((l) => (order.push(org), l));
    const w1 = waitFor("a");
    const w2 = waitFor("b");
    const w3 = waitFor("c");
    a[0].release();
    const first = await w2; // b holds none and waited before c
    a[1].release();
    const second = await w3;
    a[2].release();
    const third = await w1;
    expect(order).toEqual(["b", "c", "a"]);
    for (const l of [first, second, third]) l.release();
  });

  it("ends a wait after its time limit, and when the caller goes away", async () => {
    const shares = new ConnectionShares({ capacity: 1, perOrganization: 1 });
    const held = await shares.acquire("a", { timeoutMs: LONG });
    await expect(shares.acquire("b", { timeoutMs: 30 })).rejects.toBeInstanceOf(ShareWaitTimeout);
    let leave!: () => void;
    const abandoned = new Promise<void>((r) => (leave = r));
    const waiting = shares.acquire("c", { timeoutMs: LONG, abandoned });
    leave();
    await expect(waiting).rejects.toBeInstanceOf(ShareWaitAbandoned);
    expect(shares.status().waiting).toBe(0);
    held.release();
    held.release(); // idempotent
    expect(shares.status().held).toBe(0);
    (await shares.acquire("b", { timeoutMs: 10 })).release();
  });

  it("refuses a per-organization share larger than the pool", () => {
    expect(() => new ConnectionShares({ capacity: 2, perOrganization: 3 })).toThrow(/invalid/);
  });
});
