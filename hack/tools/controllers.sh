#!/usr/bin/env bash
# Builds the batch controllers users run beside corral, at pinned versions,
# from their Go modules, into $(REPO)/bin (or $CORRAL_BIN):
#
#   jobset-controller   sigs.k8s.io/jobset v0.11.1 (main at the module root)
#   lws-controller      sigs.k8s.io/lws v0.8.0 (main under cmd/)
#   kuberay-operator    github.com/ray-project/kuberay/ray-operator v1.6.0
#   kueue-controller    sigs.k8s.io/kueue v0.17.0 (main under cmd/kueue)
#   controller-crds/<name>/*.yaml   each module's CRDs (config/.../crd/bases)
#   controller-crds/<name>/webhooks/manifests.yaml   its webhook
#             configurations (JobSet, LWS, Kueue), which the test framework
#             registers with clientConfig.url on loopback
#
# `go install MODULE@VERSION` is refused for jobset and lws (its deprecation
# check needs the module's version list, which the proxy here does not
# serve), so each main package is built from a writable copy of the
# downloaded module with the module's own go.mod and go.sum: the controllers
# run with exactly the dependency versions their release pins.
#
# One source change, only where a controller cannot run outside its
# container image otherwise (patch_source below): Kueue reads its metrics
# certificate from a fixed path. The stamp records it (kueue=v0.17.0+...).
#
# Separate from build.sh on purpose: its own stamp (bin/.controllers-version)
# so that building the controllers never rebuilds the Kubernetes tools and
# the Kubernetes tools' stamp (bin/.tools-version) keeps meaning what it did.
# Each controller takes ~7-8 minutes from a cold Go build cache on 2 cores.
#
# Usage:
#   controllers.sh              every controller missing from the stamp
#   controllers.sh NAME...      only these (jobset lws kuberay kueue)
#
# Environment:
#   CORRAL_BIN   output directory (default: <repo>/bin)
#   FORCE=1      rebuild the named controllers
set -euo pipefail

TOOLS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${TOOLS_DIR}/../.." && pwd)"
BIN="${CORRAL_BIN:-${REPO}/bin}"
STAMP="${BIN}/.controllers-version"

# name module version main-package-dir binary crd-dir webhook-dir (relative to the module; - none)
CONTROLLERS=(
  "jobset  sigs.k8s.io/jobset                         v0.11.1 .          jobset-controller  config/components/crd/bases config/components/webhook"
  "lws     sigs.k8s.io/lws                            v0.8.0  ./cmd      lws-controller     config/crd/bases            config/webhook"
  "kuberay github.com/ray-project/kuberay/ray-operator v1.6.0  .          kuberay-operator   config/crd/bases            -"
  "kueue   sigs.k8s.io/kueue                          v0.17.0 ./cmd/kueue kueue-controller  config/components/crd/bases config/components/webhook"
)

log() { printf '[controllers] %s\n' "$*"; }
die() { printf '[controllers] ERROR: %s\n' "$*" >&2; exit 1; }

# patch_rev NAME: what patch_source changes in NAME, for the stamp.
patch_rev() {
  case "$1" in
    kueue) echo "+metrics-cert-dir-env" ;;
    *) echo "" ;;
  esac
}

# patch_source NAME SRC: changes the writable copy of a module before it
# is built.
patch_source() {
  case "$1" in
    kueue)
      # With its internal certificate management off (the webhooks use the
      # test CA's certificate on loopback), Kueue v0.17.0 loads its metrics
      # server's certificate from /etc/kueue/metrics/certs, the mount of its
      # container image, and exits when the files are missing, even with
      # metrics off; nobody but root can create that path. Read the
      # directory from KUEUE_METRICS_CERT_DIR first.
      local f="$2/cmd/kueue/main.go"
      local old='metricsCertPath := "/etc/kueue/metrics/certs"'
      grep -qF "${old}" "${f}" || die "kueue: ${f} no longer sets ${old}; review patch_source"
      sed -i "s|${old}|${old}; if d := os.Getenv(\"KUEUE_METRICS_CERT_DIR\"); d != \"\" { metricsCertPath = d }|" "${f}"
      ;;
  esac
}

wanted=("$@")
if [[ ${#wanted[@]} -eq 0 ]]; then wanted=(jobset lws kuberay kueue); fi

export GOWORK=off
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly"
mkdir -p "${BIN}/controller-crds"
touch "${STAMP}"

for want in "${wanted[@]}"; do
  found=0
  for row in "${CONTROLLERS[@]}"; do
    read -r name module version main binary crds webhooks <<<"${row}"
    [[ "${name}" == "${want}" ]] || continue
    found=1
    line="${name}=${version}$(patch_rev "${name}")"
    dir="$(GOFLAGS=-mod=mod go mod download -json "${module}@${version}" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "${dir}" ]] || die "could not download ${module}@${version}"
    # The manifests are copied every run (cheap): a stamp from an older
    # script may lack some.
    rm -rf "${BIN}/controller-crds/${name}"
    mkdir -p "${BIN}/controller-crds/${name}"
    cp "${dir}/${crds}"/*.yaml "${BIN}/controller-crds/${name}/"
    if [[ "${webhooks}" != "-" ]]; then
      mkdir -p "${BIN}/controller-crds/${name}/webhooks"
      cp "${dir}/${webhooks}/manifests.yaml" "${BIN}/controller-crds/${name}/webhooks/"
    fi
    chmod -R u+w "${BIN}/controller-crds/${name}"
    if [[ "${FORCE:-0}" != 1 && -x "${BIN}/${binary}" ]] && grep -qxF "${line}" "${STAMP}"; then
      log "${binary} ${version} up to date"
      continue
    fi
    tmp="$(mktemp -d "${BIN}/.build-${name}.XXXXXX")"
    cp -r "${dir}/." "${tmp}/src"
    chmod -R u+w "${tmp}/src"
    patch_source "${name}" "${tmp}/src"
    log "building ${binary} from ${module}@${version} (~7-8 min cold on 2 cores)"
    start=$(date +%s)
    (cd "${tmp}/src" && go build -trimpath -ldflags "-s -w" -o "${tmp}/${binary}" "${main}")
    mv -f "${tmp}/${binary}" "${BIN}/${binary}"
    rm -rf "${tmp}"
    grep -v "^${name}=" "${STAMP}" >"${STAMP}.new" || true
    printf '%s\n' "${line}" >>"${STAMP}.new"
    mv -f "${STAMP}.new" "${STAMP}"
    log "built ${BIN}/${binary} in $(( $(date +%s) - start ))s"
  done
  [[ ${found} -eq 1 ]] || die "unknown controller ${want} (jobset lws kuberay kueue)"
done
