#!/usr/bin/env bash
# kube-binaries.sh builds the kube-apiserver, kube-controller-manager and etcd
# binaries that the end-to-end and differential tests run, from the versions pinned in tools/kube/go.mod, and
# prints the directory that holds them.
#
# The directory is ${SETPOINT_CACHE:-$HOME/.cache/setpoint}/kube-<hash>, where
# <hash> is derived from tools/kube/go.sum: changing a pinned version changes
# the directory, and an existing build is reused. Concurrent callers (several
# test packages starting at once) wait on a lock instead of building twice.
#
# The first build takes several minutes on a small machine; later calls return
# at once. Build output goes to stderr; stdout carries only the directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="${root}/tools/kube"
cache="${SETPOINT_CACHE:-${HOME}/.cache/setpoint}"
hash="$(sha256sum "${mod}/go.sum" | cut -c1-16)"
dir="${cache}/kube-${hash}"

have_binaries() {
  [[ -x "${dir}/kube-apiserver" && -x "${dir}/kube-controller-manager" && -x "${dir}/etcd" ]]
}

if have_binaries; then
  echo "${dir}"
  exit 0
fi

mkdir -p "${cache}"
exec 9>"${dir}.lock"
flock 9
# Another caller may have finished the build while we waited for the lock.
if have_binaries; then
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

start=${SECONDS}
echo "kube-binaries: building kube-apiserver, kube-controller-manager ${kube_version} and etcd into ${dir}" >&2
export CGO_ENABLED=0
go build -trimpath -ldflags "${ldflags}" -o "${tmp}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -trimpath -ldflags "${ldflags}" -o "${tmp}/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager >&2
go build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" go.etcd.io/etcd/server/v3 >&2
echo "kube-binaries: built in $((SECONDS - start))s" >&2

rm -rf "${dir}"
mv "${tmp}" "${dir}"
trap - EXIT
echo "${dir}"
