// Imported before kubernetes-models (not in npm install): links the pinned on-demand installs on first use.
import { linkOnDemandPackage } from "../../../scripts/tools/on-demand";

linkOnDemandPackage("kubernetes-models");
linkOnDemandPackage("@kubernetes-models/prometheus-operator");
