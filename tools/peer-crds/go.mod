// The upstream CRDs the controller tests install: Karpenter's NodeClaim and Cluster API's
// Machine and MachineHealthCheck, taken from these pinned modules through the Go module proxy by
// scripts/build-peer-crds.sh. Nothing is built from them.
module gpuheal.test/peer-crds

go 1.26

require (
	sigs.k8s.io/cluster-api v1.14.2
	sigs.k8s.io/karpenter v1.14.0
)
