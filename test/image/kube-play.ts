// The SQLite variant's pod (deploy/kubernetes/overlays/sqlite) as `podman kube play` runs it:
// the Deployment's pod template, as the overlay renders it (kustomize.ts), made a Pod. What
// changes, and why:
//
// - kind Pod rather than Deployment: podman runs the pods of a Deployment too, but names them
//   itself, and this test needs the pod's and container's names for `exec` and `kube down`;
// - the image: the one this run built (the manifests name `petstore:<version>`);
// - a `hostPort` of this run's on 127.0.0.1 for each port: Kubernetes reaches the pod's address,
//   podman publishes each container port on the host, by default at the same number on every
//   address (9464 would be open to the network, and taken by any other run);
// - the PersistentVolumeClaim's volume: podman takes its `claimName` as the name of a podman
//   volume, so this run's volume is named instead, made before the pod starts;
// - the variables and the volume from the Secret: the overlay's Secret holds no key (its
//   PETSTORE_API_KEYS is empty), and podman looks such a reference up among its own secrets,
//   failing where Kubernetes would find the Secret; so they are left out, with the volume's mount
//   and PETSTORE_API_KEYS_FILE, which names a file in it.
//
// Everything else is the manifest's: the security contexts, the read-only root, the memory
// limit, /tmp on an emptyDir, the environment, the probes. Podman 4 makes the liveness probe a
// health check that runs `curl` (not in the image) on a port it cannot resolve from a name, and
// ignores the other probes, preStop and the grace period: the test asks the probe port itself,
// and stops the pod with a timeout of the manifest's grace period.
import { join } from 'node:path'
import { stringify } from 'yaml'
import { containersOf, KUBERNETES, type Manifest, render } from './kustomize.ts'

export interface KubePlay {
  /** The YAML podman reads. */
  yaml: string
  /** The container's name for `podman exec`: `<pod>-<container>`. */
  container: string
  /** terminationGracePeriodSeconds: how long a stop may take. */
  graceSeconds: number
}

interface Port {
  name?: string
  containerPort: number
  hostPort?: number
  hostIP?: string
}

export function sqlitePod(options: {
  name: string
  image: string
  volume: string
  apiPort: number
  probePort: number
  metricsPort: number
}): KubePlay {
  const manifests = render(join(KUBERNETES, 'overlays', 'sqlite'))
  const deployment = manifests.find((m) => m.kind === 'Deployment') as Manifest
  const template = (deployment.spec as { template: { metadata: object; spec: PodSpec } }).template
  const spec = structuredClone(template.spec)
  const [container] = containersOf({ ...deployment, spec: { template: { spec } } })
  if (container === undefined) throw new Error('the Deployment has no container')
  container.image = options.image
  const hostPorts: Record<string, number> = {
    http: options.apiPort,
    probes: options.probePort,
    metrics: options.metricsPort,
  }
  container.ports = (container.ports as Port[]).map((port) => {
    const hostPort = hostPorts[port.name ?? '']
    if (hostPort === undefined) throw new Error(`no host port for the port ${port.name}`)
    return { ...port, hostPort, hostIP: '127.0.0.1' }
  })
  container.env = (
    container.env as { name: string; valueFrom?: { secretKeyRef?: unknown } }[]
  ).filter(
    (variable) =>
      variable.valueFrom?.secretKeyRef === undefined && variable.name !== 'PETSTORE_API_KEYS_FILE',
  )
  const secrets = new Set(spec.volumes.filter((v) => v.secret !== undefined).map((v) => v.name))
  spec.volumes = spec.volumes.filter((volume) => !secrets.has(volume.name))
  container.volumeMounts = (container.volumeMounts as { name: string }[]).filter(
    (mount) => !secrets.has(mount.name),
  )
  for (const volume of spec.volumes) {
    if (volume.persistentVolumeClaim !== undefined) {
      volume.persistentVolumeClaim = { claimName: options.volume }
    }
  }
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...template.metadata, name: options.name },
    spec,
  }
  return {
    yaml: stringify(pod),
    container: `${options.name}-${String(container.name)}`,
    graceSeconds: spec.terminationGracePeriodSeconds ?? 30,
  }
}

interface PodSpec {
  terminationGracePeriodSeconds?: number
  containers: Record<string, unknown>[]
  volumes: { name: string; persistentVolumeClaim?: { claimName: string }; secret?: unknown }[]
}
