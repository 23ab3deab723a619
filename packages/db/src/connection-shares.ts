/**
 * Fair shares of a connection pool between organizations.
 *
 * pg's Pool hands connections out first come, first served: a few organizations whose exports hold
 * connections for minutes (slow or stalled readers) can take all of them, and every other
 * organization's requests then wait for the pool's connection timeout. A share is taken before a
 * unit of work that uses at most one pooled connection at a time (an export call) and released
 * after it:
 * - no organization holds more than `perOrganization` shares, so `capacity - perOrganization`
 *   connections always remain for the others;
 * - when shares are short, the next free one goes to the waiting organization holding the fewest
 *   (oldest waiter first among equals): max-min fair, so a newcomer overtakes an organization that
 *   already holds several;
 * - a wait is bounded (`timeoutMs`) and ends early when the caller goes away.
 */
export interface ConnectionSharesOptions {
  /** Shares in all: the pool's size. */
  capacity: number;
  /** Shares one organization may hold at once. */
  perOrganization: number;
}

export interface AcquireOptions {
  /** Longest wait for a share; then ShareWaitTimeout. */
  timeoutMs: number;
  /** Resolves when the caller is gone (cancelled call): the wait ends with ShareWaitAbandoned. */
  abandoned?: Promise<void>;
}

export interface ShareLease {
  /** Gives the share back; idempotent. */
  release(): void;
}

/** No share became free within the wait's time limit. */
export class ShareWaitTimeout extends Error {
  constructor(readonly organizationId: string, readonly waitedMs: number) {
    super(`no database connection share became free for organization ${organizationId} within ${waitedMs} ms`);
    this.name = "ShareWaitTimeout";
  }
}

/** The caller went away while waiting. */
export class ShareWaitAbandoned extends Error {
  constructor() {
    super("the caller went away while waiting for a database connection share");
    this.name = "ShareWaitAbandoned";
  }
}

interface Waiter {
  organizationId: string;
  seq: number;
  grant(lease: ShareLease): void;
}

export interface ConnectionSharesStatus {
  held: number;
  waiting: number;
  /** Shares held per organization (only organizations holding some). */
  byOrganization: Record<string, number>;
}

export class ConnectionShares {
  private readonly held = new Map<string, number>();
  private readonly waiters: Waiter[] = [];
  private total = 0;
  private seq = 0;

  constructor(readonly options: ConnectionSharesOptions) {
    if (!(options.capacity >= 1) || !(options.perOrganization >= 1) || options.perOrganization > options.capacity) {
      throw new Error(`invalid connection shares: capacity ${options.capacity}, per organization ${options.perOrganization}`);
    }
  }

  acquire(organizationId: string, opts: AcquireOptions): Promise<ShareLease> {
    // At once unless someone who could use a free share is already waiting (they go first).
    const othersFirst = this.waiters.some((w) => (this.held.get(w.organizationId) ?? 0) < this.options.perOrganization);
    if (!othersFirst && this.canTake(organizationId)) return Promise.resolve(this.take(organizationId));
    return new Promise<ShareLease>((resolve, reject) => {
      const started = Date.now();
      let settled = false;
      const leave = () => {
        settled = true;
        clearTimeout(timer);
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
      };
      const waiter: Waiter = {
        organizationId,
        seq: this.seq++,
        grant: (lease) => {
          if (settled) return lease.release();
          leave();
          resolve(lease);
        },
      };
      const timer = setTimeout(() => {
        if (settled) return;
        leave();
        reject(new ShareWaitTimeout(organizationId, Date.now() - started));
        // Others may be waiting behind this one only because of ordering: let them try.
        this.dispatch();
      }, opts.timeoutMs);
      timer.unref?.();
      void opts.abandoned?.then(() => {
        if (settled) return;
        leave();
        reject(new ShareWaitAbandoned());
        this.dispatch();
      });
      this.waiters.push(waiter);
      this.dispatch();
    });
  }

  status(): ConnectionSharesStatus {
    return { held: this.total, waiting: this.waiters.length, byOrganization: Object.fromEntries(this.held) };
  }

  private canTake(organizationId: string): boolean {
    return this.total < this.options.capacity && (this.held.get(organizationId) ?? 0) < this.options.perOrganization;
  }

  private take(organizationId: string): ShareLease {
    this.total++;
    this.held.set(organizationId, (this.held.get(organizationId) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.held.get(organizationId) ?? 1) - 1;
        if (left > 0) this.held.set(organizationId, left);
        else this.held.delete(organizationId);
        this.dispatch();
      },
    };
  }

  /** Grants free shares to waiters: the organization holding the fewest first, then the oldest waiter. */
  private dispatch(): void {
    while (this.total < this.options.capacity && this.waiters.length > 0) {
      let best: Waiter | undefined;
      let bestHeld = Infinity;
      for (const w of this.waiters) {
        const h = this.held.get(w.organizationId) ?? 0;
        if (h >= this.options.perOrganization) continue;
        if (h < bestHeld || (h === bestHeld && w.seq < best!.seq)) {
          best = w;
          bestHeld = h;
        }
      }
      if (!best) return;
      best.grant(this.take(best.organizationId));
    }
  }
}
