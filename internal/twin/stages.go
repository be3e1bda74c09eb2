package twin

import (
	"fmt"
	"time"
)

// PodTiming is how long simulated pods take through their lives. Each
// delay is drawn afresh for every pod: Delay plus a uniformly random
// extra of up to Jitter.
type PodTiming struct {
	// Start is from the scheduler binding a pod to a node until its
	// container runs (image pull, container start): the pod is Running
	// and not Ready.
	Start, StartJitter time.Duration
	// Ready is from the container running until the pod turns Ready
	// (the readiness probe's first success).
	Ready, ReadyJitter time.Duration
	// Terminate is from a pod's deletion until it is gone (the grace
	// period a real container uses to drain).
	Terminate time.Duration
}

// DefaultPodTiming is a small service's pods: 1–2 s to start, 2–4 s more
// to turn Ready, 1 s to terminate.
var DefaultPodTiming = PodTiming{
	Start: time.Second, StartJitter: time.Second,
	Ready: 2 * time.Second, ReadyJitter: 2 * time.Second,
	Terminate: time.Second,
}

// nodeLabel marks the twin's simulated nodes; kwok manages those only.
const nodeLabel = "setpoint.dev/twin-node"

// stages returns the kwok configuration (a stream of Stage documents)
// that moves the twin's nodes and pods through their lives:
//
//   - node-ready: a new node reports Ready, its address and a capacity of
//     32 CPUs, 256 GiB and 110 pods;
//   - pod-start: a pod bound to a node gets its IP and runs, not Ready
//     (after Start plus jitter);
//   - pod-ready: a running pod turns Ready (after Ready plus jitter);
//   - pod-terminate: a deleted pod is removed (after Terminate).
//
// kwok's own stage sets do the same with more states (init containers,
// Jobs); these are the ones an autoscaled workload needs, written for the
// twin so that the states the HPA reads (Running, the Ready condition and
// its transition time, the start time) are explicit.
func stages(t PodTiming) []byte {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	return fmt.Appendf(nil, stagesTemplate,
		ms(t.Start), ms(t.Start+t.StartJitter),
		ms(t.Ready), ms(t.Ready+t.ReadyJitter),
		ms(t.Terminate))
}

const stagesTemplate = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", reason: KubeletReady, message: simulated, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: simulated, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: DiskPressure, status: "False", reason: KubeletHasNoDiskPressure, message: simulated, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      - {type: PIDPressure, status: "False", reason: KubeletHasSufficientPID, message: simulated, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      addresses:
      - {type: InternalIP, address: {{ NodeIP | Quote }}}
      - {type: Hostname, address: {{ NodeName | Quote }}}
      allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
      capacity: {cpu: "32", memory: 256Gi, pods: "110"}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: simulated
        containerRuntimeVersion: simulated
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-start
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  delay:
    durationMilliseconds: %d
    jitterDurationMilliseconds: %d
  next:
    event: {type: Normal, reason: Started, message: Started container (simulated)}
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "False", reason: ContainersNotReady, lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['False']
  delay:
    durationMilliseconds: %d
    jitterDurationMilliseconds: %d
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", reason: "", message: "", lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", reason: "", message: "", lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: true
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ (index $.status.containerStatuses $index).state.running.startedAt | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-terminate
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  delay:
    durationMilliseconds: %d
  next:
    delete: true
`
