# kubectl-rebalance developer entry points. The two that matter most:
#   make demo   - the WorkloadRebalancer tutorial, end to end, on a local control plane
#   make test   - unit tests and the real-control-plane e2e tests
# KARMADA_VERSION=v1.12.0 (or v1.16.0; default v1.18.2) makes controlplane, sandbox, demo, test
# and bench build and start that Karmada release; make test-matrix runs the core set on each.

GO ?= go
BIN := _output/bin

.PHONY: all build controlplane test test-matrix test-unit sandbox demo bench docs release-snapshot release-test image image-test clean fuzz faults

all: build

## build: the plugin binary into _output/bin/kubectl-rebalance
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/kubectl-rebalance ./cmd/kubectl-rebalance

## controlplane: the pinned etcd, Kubernetes, Karmada and kwok binaries (no-op when up to date; KARMADA_VERSION picks the release)
controlplane:
	hack/build-controlplane.sh

# FAILBACK_SMOKE are the failback e2e tests make test runs: the seed story and
# the failure budget (about 1.5 min with the control plane); the whole package
# (also flapping clusters, SIGTERM/SIGINT mid-wave, resume after SIGKILL,
# displaced workloads, a StatefulSet, the Pull member, RBAC) takes about
# 11 min on 2 cores and is make test-failback.
FAILBACK_SMOKE := ^(TestFailbackSeedStory|TestFailbackFailureBudget)$$

# E2E_MEASUREMENTS are e2e tests that are measurements more than checks and
# take minutes each: make test-measurements runs them (the waved batch of 50
# moved make-before-break, about 3.5 min).
E2E_MEASUREMENTS := ^TestWavedBatchKeepsReplicasReady$$

# E2E_MOVE_FAULTS are make-before-break fault tests make test leaves out for
# time (about 6.5 min): the deschedule daemon recovering a killed move, a
# dispatching suspension, a scale and a second process mid-move, SIGKILL
# after the settle write, --move-timeout, and a recorded run all at once
# above its burst. make test keeps the killed move recovered by the next
# command, Ctrl-C after the settle write, the batch at the defaults and the
# guarded patch; make test-move-faults runs the rest.
E2E_MOVE_FAULTS := ^(TestKilledMoveThenSourceFailsRecoveredByTheDescheduler|TestDispatchingSuspendedMidMoveSurvives|TestScaledMidMoveLetsKarmadaPlace|TestTwoProcessesOnOneWorkload|TestKilledAfterTheSettleWriteKeepsTheNewReplicas|TestMoveTimeoutUndoesAMoveStillStaging|TestRecordedAllAtOnceHoldsOnlyWhatStarts)$$

.PHONY: test-move-faults
## test-move-faults: the make-before-break fault tests make test leaves out (daemon recovery, dispatching, scale, a second process, SIGKILL after the settle write, --move-timeout, a recorded run above its burst)
test-move-faults: controlplane
	$(GO) test -count=1 -p 1 -timeout 30m -run '$(E2E_MOVE_FAULTS)' ./test/e2e/handover

.PHONY: test-measurements
## test-measurements: the e2e measurements make test leaves out (ready replicas of a waved batch of 50 moved make-before-break)
test-measurements: controlplane
	$(GO) test -count=1 -p 1 -timeout 30m -run '$(E2E_MEASUREMENTS)' ./test/e2e/...

## test: every test, including the e2e tests on a real Karmada control plane
## (e2e packages one at a time: each starts its own control plane on 2 cores;
## the benchmark and fault packages hold no tests, only vet: their own targets run them;
## of test/e2e/failback only the smoke subset FAILBACK_SMOKE, the rest is make test-failback)
test: controlplane
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v -e /test/e2e -e /test/bench -e /test/faults)
	$(GO) vet ./test/bench/... ./test/faults/...
	$(GO) test -count=1 -p 1 -timeout 60m -skip '$(E2E_MEASUREMENTS)|$(E2E_MOVE_FAULTS)' $$($(GO) list ./test/e2e/... | grep -v /test/e2e/failback)
	$(GO) test -count=1 -timeout 20m -run '$(FAILBACK_SMOKE)' ./test/e2e/failback

.PHONY: test-failback
## test-failback: every failback e2e test (seed story, flapping cluster, failure budget, SIGTERM/SIGINT mid-wave, resume after SIGKILL, RBAC) on a real control plane
test-failback: controlplane
	$(GO) test -count=1 -timeout 30m ./test/e2e/failback

## test-matrix: the core e2e set on every pinned Karmada version (KARMADA_VERSIONS=v1.12.0,v1.18.2 for some), as a pass/fail table
test-matrix:
	$(GO) run ./hack/test-matrix $(if $(KARMADA_VERSIONS),-versions=$(KARMADA_VERSIONS))

## test-unit: the tests that need no control plane
test-unit:
	$(GO) test -short ./...

## sandbox: a local Karmada control plane in the foreground (SANDBOX_DIR, default _sandbox/)
sandbox: controlplane build
	$(GO) run ./hack/sandbox $(SANDBOX_ARGS)

## demo: the WorkloadRebalancer tutorial on a local control plane (or KUBECONFIG=... of a sandbox via DEMO_ARGS=--kubeconfig=...)
demo: controlplane build
	$(GO) run ./hack/demo $(DEMO_ARGS)

## bench: benchmarks on the real control plane
bench: controlplane
	$(GO) test -p 1 ./test/bench/... -run '^$$' -bench . -benchtime 1x -timeout 90m

.PHONY: bench-handover
## bench-handover: a batch of 20 make-before-break moves next to the same batch in one write (about 6 min)
bench-handover: controlplane
	$(GO) test -count=1 -p 1 ./test/bench/handover -run '^$$' -bench BatchMove -benchtime 1x -timeout 40m

.PHONY: bench-plan
## bench-plan: only the plan benchmark (2,000 workloads after a failover and recovery)
bench-plan: controlplane
	$(GO) test -p 1 ./test/bench/plan -run '^$$' -bench . -benchtime 1x -timeout 60m

## fuzz: run every fuzz target for FUZZTIME each (default 30s); plain `go test` (and `make test`) runs their seeds
FUZZTIME ?= 30s
FUZZ_TARGETS := pkg/cmd:FuzzWorkloadFile pkg/cmd:FuzzTargetArgs pkg/cmd:FuzzFlagValues pkg/cmd:FuzzOutputFormat pkg/record:FuzzRebalancerManifest
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME); \
	done

## faults: kubectl rebalance through a fault-injecting proxy on the real control plane, apiserver restarted mid-run; prints the figures of docs/reliability.md
faults: controlplane
	$(GO) test -p 1 ./test/faults/... -run '^$$' -bench . -benchtime 1x -timeout 60m

## docs: regenerate docs/reference from the command tree
docs:
	$(GO) run ./hack/gendocs

## release-snapshot: every release archive and the krew manifest, locally, into dist/
release-snapshot:
	hack/release-snapshot.sh

## release-test: a snapshot release, its krew manifest checked by krew's own validator and installed
## by a real krew for every platform (goreleaser and krew built from the Go module proxy; minutes)
release-test:
	cd hack/krewcheck && $(GO) test -count=1 -timeout 90m -v .

VERSION ?= v0.0.0-dev
## image: the linux/amd64+arm64 image as an OCI layout tar in _output/image/ (no Docker, no base image)
image:
	cd hack/image && $(GO) run . -root $(CURDIR) -version $(VERSION) -o $(CURDIR)/_output/image/kubectl-rebalance.tar

## image-test: build the image tar and check its platforms, entrypoint, user and files
image-test:
	cd hack/image && $(GO) test -count=1 -timeout 40m -v .

clean:
	rm -rf _output dist
