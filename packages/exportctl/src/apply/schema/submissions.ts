import { z } from "zod";
import { instant, lastModified, ref, text, uuid } from "./scalars";

const step = z.strictObject({
  id: uuid,
  name: z.string(),
  kind: z.enum(["Recording", "Verification"]).optional(),
  status: z.enum(["Pending", "InProgress", "Completed", "Skipped"]).optional(),
});

export const submission = z.strictObject({
  id: uuid,
  formId: uuid,
  formVersion: z.number().int().min(1).optional(),
  recordId: z.string().min(1).optional(),
  siteId: ref,
  status: z.enum(["InProgress", "Completed", "Cancelled"]).optional(),
  archived: z.boolean().optional(),
  startedAt: instant.nullable().optional(),
  completedAt: instant.nullable().optional(),
  values: z.record(z.string(), z.unknown()).optional(),
  verifications: z.record(z.string(), instant).optional(),
  steps: z.array(step).optional(),
  lastModified,
});

export const deviation = z
  .strictObject({
    id: uuid,
    code: z.string().regex(/^DEV-\d+$/, "must look like DEV-<number>").optional(),
    submissionId: uuid,
    stepId: ref,
    severity: z.enum(["Low", "Medium", "High", "Critical"]),
    status: z.enum(["Open", "InProgress", "Resolved"]).optional(),
    resolutionType: z.enum(["LinkedResolutionRecord", "Comment"]).nullable().optional(),
    fieldKey: text,
    fieldLabel: text,
    displayValue: text,
    rowId: text,
    assignedUserId: ref,
    assignedTeamId: ref,
    supplierId: ref,
    comment: text,
    resolutionComment: text,
    resolvedById: ref,
    resolvedAt: instant.nullable().optional(),
    signedById: ref,
    signedAt: instant.nullable().optional(),
    linkedRecordId: ref,
    linkedResolutionComment: text,
    createdAt: instant.optional(),
    lastModified,
  })
  .superRefine((d, ctx) => {
    const resolved = d.status === "Resolved";
    if (resolved && !d.resolutionType) ctx.addIssue({ code: "custom", path: ["resolutionType"], message: "is required when status is Resolved" });
    if (!resolved && d.resolutionType) ctx.addIssue({ code: "custom", path: ["resolutionType"], message: "must be empty unless status is Resolved" });
    if (!resolved && (d.resolvedAt || d.resolvedById)) ctx.addIssue({ code: "custom", path: ["resolvedAt"], message: "resolvedAt/resolvedById need status Resolved" });
    if ((d.signedAt || d.signedById) && d.resolutionType !== "Comment") {
      ctx.addIssue({ code: "custom", path: ["signedAt"], message: "a signature exists only on a deviation resolved by Comment" });
    }
    if (d.resolutionType === "LinkedResolutionRecord" && !d.linkedRecordId) {
      ctx.addIssue({ code: "custom", path: ["linkedRecordId"], message: "is required when resolutionType is LinkedResolutionRecord" });
    }
    if (d.status === "InProgress" && !d.linkedRecordId) {
      ctx.addIssue({ code: "custom", path: ["linkedRecordId"], message: "is required when status is InProgress (a linked record moves a deviation to InProgress)" });
    }
  });

export type SubmissionInput = z.output<typeof submission>;
