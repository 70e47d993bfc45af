// Builds the upstream helm binary used by gpuheal's real-node test tier (helm lint, template,
// install, upgrade, uninstall of deploy/helm/gpuheal). No Go source of ours lives here:
// scripts/build-node-tools.sh runs `go build helm.sh/helm/v3/cmd/helm` against this module.
module gpuheal.io/tools/helm

go 1.26.0

require helm.sh/helm/v3 v3.22.0
