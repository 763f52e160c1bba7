#!/usr/bin/env bash
# Builds the test control plane into $(REPO)/bin from Go modules only:
#
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#       k8s.io/kubernetes v1.36.3, every staging module replaced by v0.36.3
#   etcd      go.etcd.io/etcd/server/v3 v3.6.16 via hack/tools/etcd (etcdmain.Main)
#   kwok      sigs.k8s.io/kwok v0.8.0 (cmd/kwok)
#   kwok-stages/*.yaml
#             kwok's stages, written by hack/tools/stages: the stock ones
#             embedded in the kwok module, pod-complete with its delay
#             annotations; rewritten (alone) whenever hack/tools/stages
#             changes (kwok-stages/.stages-version)
#   controller-gen
#             sigs.k8s.io/controller-tools v0.21.0 (the release built on
#             k8s.io v0.36), for `make generate`
#
# Idempotent and cached: when every output exists and bin/.tools-version
# matches TOOLS_VERSION below, it exits at once. Otherwise it builds what is
# missing (or everything, when the pins changed). Needs only Go >= 1.26 and
# access to the Go module proxy. First build: ~10-15 min on 2 cores.
#
# Usage:
#   build.sh                  every output above, then the stamp
#   build.sh NAME...          only these binaries (e.g. controller-gen), each
#                             when missing or older than hack/tools/go.mod;
#                             no stages, and the stamp is left alone (it
#                             vouches for the full set only)
#
# Environment:
#   CORRAL_BIN   output directory (default: <repo>/bin)
#   FORCE=1      rebuild everything
set -euo pipefail

# Bump this whenever a pin in hack/tools/go.mod, the ldflags or the list of
# outputs changes; a mismatch with bin/.tools-version forces a full rebuild.
TOOLS_VERSION="kubernetes=v1.36.3 etcd=v3.6.16 kwok=v0.8.0 controller-tools=v0.21.0 rev=2"

KUBE_VERSION="v1.36.3"
KUBE_BUILD_DATE="2026-07-22T18:07:38Z" # publication time of v1.36.3 on the Go proxy

TOOLS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${TOOLS_DIR}/../.." && pwd)"
BIN="${CORRAL_BIN:-${REPO}/bin}"
STAMP="${BIN}/.tools-version"

KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
STAGES=(node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete)
# The stages' own stamp: a digest of the program and files that write them,
# so that a change to a stage rewrites bin/kwok-stages without a rebuild.
STAGES_VERSION="$(cat "${TOOLS_DIR}"/stages/*.go "${TOOLS_DIR}"/stages/*.yaml | sha256sum | cut -c1-16)"
STAGES_STAMP="${BIN}/kwok-stages/.stages-version"

log() { printf '[tools] %s\n' "$*"; }
die() { printf '[tools] ERROR: %s\n' "$*" >&2; exit 1; }

pkg_for() {
  case "$1" in
    kube-*|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    etcd)           echo "./etcd" ;;
    kwok)           echo "sigs.k8s.io/kwok/cmd/kwok" ;;
    controller-gen) echo "sigs.k8s.io/controller-tools/cmd/controller-gen" ;;
    *)              die "unknown binary $1" ;;
  esac
}

all_binaries=("${KUBE_BINARIES[@]}" etcd kwok controller-gen)

# Only some binaries (build.sh NAME...): no stages, no stamp.
partial=0
wanted=("${all_binaries[@]}")
if [[ $# -gt 0 ]]; then
  partial=1
  wanted=("$@")
  for b in "${wanted[@]}"; do pkg_for "${b}" >/dev/null; done
fi

# ---------------------------------------------------------------- up to date?
missing=()
stages_missing=0
if [[ ${partial} -eq 1 ]]; then
  for b in "${wanted[@]}"; do
    if [[ "${FORCE:-0}" == 1 || ! -x "${BIN}/${b}" || "${TOOLS_DIR}/go.mod" -nt "${BIN}/${b}" ]]; then
      missing+=("${b}")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "up to date in ${BIN}: ${wanted[*]}"
    exit 0
  fi
else
  for b in "${wanted[@]}"; do
    [[ -x "${BIN}/${b}" ]] || missing+=("${b}")
  done
  for s in "${STAGES[@]}"; do
    [[ -s "${BIN}/kwok-stages/${s}.yaml" ]] || stages_missing=1
  done
  [[ "$(cat "${STAGES_STAMP}" 2>/dev/null)" == "${STAGES_VERSION}" ]] || stages_missing=1
  stamp=""
  [[ -f "${STAMP}" ]] && stamp="$(cat "${STAMP}")"

  if [[ "${FORCE:-0}" != 1 && ${#missing[@]} -eq 0 && ${stages_missing} -eq 0 && "${stamp}" == "${TOOLS_VERSION}" ]]; then
    log "up to date in ${BIN} (${TOOLS_VERSION})"
    exit 0
  fi

  if [[ "${FORCE:-0}" == 1 || "${stamp}" != "${TOOLS_VERSION}" ]]; then
    if [[ "${FORCE:-0}" == 1 ]]; then
      log "FORCE=1: rebuilding everything"
    elif [[ -n "${stamp}" ]]; then
      log "pins changed (${stamp} -> ${TOOLS_VERSION}): rebuilding everything"
    else
      log "no stamp ${STAMP}: building everything"
    fi
    missing=("${all_binaries[@]}")
    stages_missing=1
  fi
fi

# ---------------------------------------------------------------- prerequisites
command -v go >/dev/null 2>&1 || die "go not found in PATH; install Go >= 1.26 (https://go.dev/dl/)"
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [[ "${go_minor}" =~ ^[0-9]+$ ]] && (( go_minor < 26 )); then
  # go.mod says "go 1.26.0": with the default GOTOOLCHAIN=auto, go fetches
  # a 1.26 toolchain from the module proxy by itself.
  log "note: $(go env GOVERSION) < go1.26; relying on GOTOOLCHAIN=auto to fetch go1.26"
fi

export GOWORK=off      # never let a go.work above us change the build list
export CGO_ENABLED=0   # static binaries, no C toolchain needed (like upstream releases)
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

mkdir -p "${BIN}"
cd "${TOOLS_DIR}"

# ---------------------------------------------------------------- binaries
if [[ ${#missing[@]} -gt 0 ]]; then
  ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
    ldflags+=" -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=36"
    ldflags+=" -X ${pkg}.gitCommit= -X ${pkg}.gitTreeState=clean"
    ldflags+=" -X ${pkg}.buildDate=${KUBE_BUILD_DATE}"
  done

  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("$(pkg_for "${b}")"); done

  if [[ ${partial} -eq 0 ]]; then
    log "downloading modules (Go module proxy: $(go env GOPROXY))"
    go mod download
  fi

  tmp="$(mktemp -d "${BIN}/.build.XXXXXX")"
  trap 'rm -rf "${tmp}"' EXIT
  log "building ${missing[*]} with $(go env GOVERSION), GOMAXPROCS=$(nproc 2>/dev/null || echo '?')"
  [[ ${partial} -eq 0 ]] && log "(from a cold Go build cache this takes ~10-15 minutes on 2 cores; warm rebuilds take seconds)"
  start=$(date +%s)
  go build -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}"
  for b in "${missing[@]}"; do
    [[ -x "${tmp}/${b}" ]] || die "go build did not produce ${b}"
    mv -f "${tmp}/${b}" "${BIN}/${b}"
    log "built ${BIN}/${b}"
  done
  log "binaries built in $(( $(date +%s) - start ))s"
fi

# ---------------------------------------------------------------- kwok stages
if [[ ${stages_missing} -eq 1 ]]; then
  log "writing kwok stages to ${BIN}/kwok-stages"
  # Written aside and swapped in: a test starting meanwhile finds either
  # the old stages or the new ones, never none.
  rm -rf "${BIN}/.kwok-stages.new" "${BIN}/.kwok-stages.old"
  go run ./stages "${BIN}/.kwok-stages.new" | sed 's/^/[tools]   /'
  printf '%s\n' "${STAGES_VERSION}" >"${BIN}/.kwok-stages.new/.stages-version"
  [[ -d "${BIN}/kwok-stages" ]] && mv "${BIN}/kwok-stages" "${BIN}/.kwok-stages.old"
  mv "${BIN}/.kwok-stages.new" "${BIN}/kwok-stages"
  rm -rf "${BIN}/.kwok-stages.old"
fi

# ---------------------------------------------------------------- smoke check
for b in "${wanted[@]}"; do
  case "${b}" in
    kube-apiserver|controller-gen) "${BIN}/${b}" --version | sed 's/^/[tools]   /' ;;
    etcd)                          "${BIN}/etcd" --version | sed -n "1s/^/[tools]   /p" ;;
    kwok)                          "${BIN}/kwok" --version 2>/dev/null | sed -n "1s/^/[tools]   /p" || true ;;
  esac
done

if [[ ${partial} -eq 1 ]]; then
  log "done: ${wanted[*]} in ${BIN}"
  exit 0
fi
printf '%s\n' "${TOOLS_VERSION}" >"${STAMP}"
log "done: ${BIN} (${TOOLS_VERSION})"
