// Imported before better-sqlite3 (not in npm install): links the pinned on-demand install on first use.
import { linkOnDemandPackage } from "../../../scripts/tools/on-demand";

linkOnDemandPackage("better-sqlite3");
