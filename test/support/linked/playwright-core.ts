// Imported before playwright-core (not in npm install): links the pinned on-demand install on first use.
import { linkOnDemandPackage } from "../../../scripts/tools/on-demand";

linkOnDemandPackage("playwright-core");
