#!/usr/bin/env bash
# kube-binaries.sh builds the binaries that the end-to-end, differential and
# fleet tests run, and prints the directory that holds them:
#
#   kube-apiserver, kube-controller-manager, kube-scheduler  the versions
#       pinned in tools/kube/go.mod (k8s.io/kubernetes)
#   etcd   the version pinned there (go.etcd.io/etcd/server/v3)
#   kwok   the version pinned there too (sigs.k8s.io/kwok), built on the
#          same Kubernetes libraries as the others; it simulates nodes and
#          pod lifecycles for the cluster twin (internal/twin)
#
# The directory is ${SETPOINT_CACHE:-$HOME/.cache/setpoint}/kube-<hash>, where
# <hash> is derived from tools/kube/go.sum: changing a pinned version changes
# the directory, and an existing build is reused.
# Concurrent callers (several test packages starting at once) wait on a lock
# instead of building twice.
#
# The first build takes several minutes on a small machine; later calls return
# at once. Build output goes to stderr; stdout carries only the directory.
#
# With --check it builds nothing: it prints the directory and exits 0 when
# every binary is there, and exits 1 when one is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="${root}/tools/kube"
cache="${SETPOINT_CACHE:-${HOME}/.cache/setpoint}"
hash="$(sha256sum "${mod}/go.sum" | cut -c1-16)"
dir="${cache}/kube-${hash}"

# core are the binaries every kube test needs; extras were added later (the
# twin's), and a directory built before them gets them added in place.
core=(kube-apiserver kube-controller-manager etcd)
extras=(kube-scheduler kwok)

have() {
  local name
  for name in "$@"; do
    [[ -x "${dir}/${name}" ]] || return 1
  done
}

if have "${core[@]}" "${extras[@]}"; then
  echo "${dir}"
  exit 0
fi
if [[ "${1:-}" == --check ]]; then
  exit 1
fi

mkdir -p "${cache}"
exec 9>"${dir}.lock"
flock 9
# Another caller may have finished the build while we waited for the lock.
if have "${core[@]}" "${extras[@]}"; then
  echo "${dir}"
  exit 0
fi

tmp="$(mktemp -d "${dir}.tmp.XXXXXX")"
chmod 755 "${tmp}"
trap 'rm -rf "${tmp}"' EXIT

cd "${mod}"
kube_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
major="$(echo "${kube_version#v}" | cut -d. -f1)"
minor="$(echo "${kube_version#v}" | cut -d. -f2)"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X ${pkg}.gitVersion=${kube_version}"
  ldflags+=" -X ${pkg}.gitMajor=${major}"
  ldflags+=" -X ${pkg}.gitMinor=${minor}"
  ldflags+=" -X ${pkg}.gitTreeState=clean"
done
export CGO_ENABLED=0

# build NAME builds one binary into ${tmp}.
build() {
  case "$1" in
    kube-*) go build -trimpath -ldflags "${ldflags}" -o "${tmp}/$1" "k8s.io/kubernetes/cmd/$1" >&2 ;;
    etcd) go build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" go.etcd.io/etcd/server/v3 >&2 ;;
    # In tools/kube, on the Kubernetes libraries the other binaries use, so
    # it shares their compiled packages (built on its own go.mod's versions
    # it compiled a second copy of them: most of a cold build's time).
    kwok) go build -trimpath -ldflags "-s -w" -o "${tmp}/kwok" sigs.k8s.io/kwok/cmd/kwok >&2 ;;
  esac
}

start=${SECONDS}
if have "${core[@]}"; then
  # Add what is missing to the existing directory, one binary at a time.
  for name in "${extras[@]}"; do
    if ! have "${name}"; then
      echo "kube-binaries: adding ${name} to ${dir}" >&2
      build "${name}"
      mv "${tmp}/${name}" "${dir}/${name}"
    fi
  done
  echo "kube-binaries: built in $((SECONDS - start))s" >&2
  echo "${dir}"
  exit 0
fi

echo "kube-binaries: building ${core[*]} ${extras[*]} (kubernetes ${kube_version}, kwok $(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)) into ${dir}" >&2
for name in "${core[@]}" "${extras[@]}"; do
  build "${name}"
done
echo "kube-binaries: built in $((SECONDS - start))s" >&2

rm -rf "${dir}"
mv "${tmp}" "${dir}"
trap - EXIT
echo "${dir}"
