import { ServiceMetrics, VISIBILITY_HORIZON_HOLDERS, type MetricsOptions, type VisibilityHorizonHolder } from "@exportsvc/common";
import { RENDERED_PAGE_SOURCES, type RenderedPageSource } from "@exportsvc/datasets";

/** Dataset families, for the export counters. */
export const EXPORT_FAMILIES = ["resource", "deviations", "submission", "grid"] as const;
export type ExportFamily = (typeof EXPORT_FAMILIES)[number];

/** Where a form dataset page's `_cursor` values came from: stored with the rows, or signed by the page query. */
export const FORM_PAGE_CURSOR_SOURCES = ["stored", "signed"] as const;
export type FormPageCursorSource = (typeof FORM_PAGE_CURSOR_SOURCES)[number];


/** The export service's metric families (pages streamed, their cursors, the visibility horizon), beside the shared ones. */
export class ExportMetrics extends ServiceMetrics {
  readonly exportRows = this.counter("export_rows_total", "CSV data rows streamed to clients, by dataset family.", ["family"]);
  readonly exportBytes = this.counter("export_bytes_total", "CSV bytes streamed to clients (before compression), by dataset family.", ["family"]);
  readonly formPages = this.counter("export_form_pages_total", "Form dataset pages exported, by where their _cursor values came from: stored with the rows, or signed by the page query (the table's signing key left the export's CURSOR_KEYS, or the schema service has none).", ["source"]);
  readonly renderedPages = this.counter("export_rendered_dataset_pages_total", "Pages of resource datasets and deviations, by how they were read: table (their rendered table was current), patched (the table, with the rows written since its render rendered live) or live (no table, too few rows, or a record the rows show changed since the render).", ["source"]);
  readonly renderedPageReplans = this.counter("export_rendered_dataset_page_replans_total", "Pages of resource datasets and deviations planned again: the rendered state they were planned on had moved (a render or a write committed in between), so PostgreSQL refused their statement before its first row.");
  readonly visibilityHorizonLag = this.gauge("export_visibility_horizon_lag_seconds", "How far behind the current time the last export page's visibility horizon was held, by holder kind: undeclared_writer / declared_writer (open transactions that hold a transaction id; declared ones only for their own organization), pending_changes (unapplied form changes), reader_ignored (an open read-only transaction, which does not hold it: reported only).", ["holder"]);

  constructor(options: MetricsOptions = {}) {
    super(options);
    for (const holder of VISIBILITY_HORIZON_HOLDERS) this.visibilityHorizonLag.set({ holder }, 0);
    for (const source of RENDERED_PAGE_SOURCES) this.renderedPages.inc({ source }, 0);
  }

  /** A page of a resource dataset or deviations, by how it was read. */
  recordRenderedPage(source: RenderedPageSource): void {
    this.renderedPages.inc({ source });
  }

  /** A page of a resource dataset or deviations planned again (its rendered state had moved). */
  recordRenderedPageReplan(): void {
    this.renderedPageReplans.inc();
  }

  /** Adds rows and bytes of a streamed page (call per chunk or once per page). */
  recordExport(family: ExportFamily, rows: number, bytes: number): void {
    if (rows > 0) this.exportRows.inc({ family }, rows);
    if (bytes > 0) this.exportBytes.inc({ family }, bytes);
  }

  /** Seconds each kind of holder kept the horizon of the page just planned behind now (0: none). */
  observeVisibilityHorizonLag(secondsByHolder: Record<VisibilityHorizonHolder, number>): void {
    for (const holder of VISIBILITY_HORIZON_HOLDERS) this.visibilityHorizonLag.set({ holder }, Math.max(0, secondsByHolder[holder] ?? 0));
  }

  /** A form dataset page exported, by where its `_cursor` values came from. */
  recordFormPage(source: FormPageCursorSource): void {
    this.formPages.inc({ source });
  }

  /** Both sources at 0 from start-up, so the first signed page is an increase. */
  exposeFormPages(): void {
    for (const source of FORM_PAGE_CURSOR_SOURCES) this.formPages.inc({ source }, 0);
  }
}
