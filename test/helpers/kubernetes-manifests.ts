// The rendered manifests of deploy/kubernetes checked as a test of them needs: each object against
// its schema (kubernetes-models, the Prometheus Operator's), and what matters of a workload held
// against the image, the configuration and the docs (the probe port and paths, the grace period,
// the locked-down container, the Secret's keys, the egress the NetworkPolicy opens). Shared by
// test/kubernetes.test.ts and test/kubernetes-cloudnative-pg.test.ts.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type {
  IPodMonitor,
  IPrometheusRule,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import {
  PodMonitor,
  PrometheusRule,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import type { IDeployment } from 'kubernetes-models/apps/v1'
import { Deployment } from 'kubernetes-models/apps/v1'
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import type { IJob } from 'kubernetes-models/batch/v1'
import { Job } from 'kubernetes-models/batch/v1'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import type {
  IConfigMap,
  IContainer,
  IPersistentVolumeClaim,
  IPodSpec,
  IProbe,
  ISecret,
  IService,
} from 'kubernetes-models/v1'
import { ConfigMap, PersistentVolumeClaim, Secret, Service } from 'kubernetes-models/v1'
import { configDefaults, loadConfig } from '../../src/config.ts'
import { DRAIN_MS } from '../../src/process/shutdown.ts'
import { ROOT } from '../image/commands.ts'
import type { Manifest } from '../image/kustomize.ts'

/** Each kind the overlays hold, with its schema. A kind missing here fails the test. */
export const SCHEMAS: Record<string, (manifest: Manifest) => void> = {
  'apps/v1 Deployment': (m) => new Deployment(m as unknown as IDeployment).validate(),
  'batch/v1 Job': (m) => new Job(m as unknown as IJob).validate(),
  'v1 Service': (m) => new Service(m as unknown as IService).validate(),
  'v1 Secret': (m) => new Secret(m as unknown as ISecret).validate(),
  'v1 PersistentVolumeClaim': (m) =>
    new PersistentVolumeClaim(m as unknown as IPersistentVolumeClaim).validate(),
  'networking.k8s.io/v1 NetworkPolicy': (m) =>
    new NetworkPolicy(m as unknown as INetworkPolicy).validate(),
  'policy/v1 PodDisruptionBudget': (m) =>
    new PodDisruptionBudget(m as unknown as IPodDisruptionBudget).validate(),
  'autoscaling/v2 HorizontalPodAutoscaler': (m) =>
    new HorizontalPodAutoscaler(m as unknown as IHorizontalPodAutoscaler).validate(),
  'v1 ConfigMap': (m) => new ConfigMap(m as unknown as IConfigMap).validate(),
  'monitoring.coreos.com/v1 PrometheusRule': (m) =>
    new PrometheusRule(m as unknown as IPrometheusRule).validate(),
  'monitoring.coreos.com/v1 PodMonitor': (m) =>
    new PodMonitor(m as unknown as IPodMonitor).validate(),
}

/**
 * Every object checked against its schema in `schemas` (SCHEMAS unless given): a bad one fails
 * with the schema's words.
 */
export function validated(
  manifests: Manifest[],
  schemas: Record<string, (manifest: Manifest) => void> = SCHEMAS,
): Manifest[] {
  for (const manifest of manifests) {
    const id = `${manifest.apiVersion} ${manifest.kind}`
    const validate = schemas[id]
    assert.ok(validate, `${id} ${manifest.metadata.name}: no schema for this kind in the test`)
    try {
      validate(manifest)
    } catch (error) {
      throw new Error(
        `${manifest.kind} ${manifest.metadata.name} is not valid: ${error instanceof Error ? error.message : String(error)}`,
      )
    }
  }
  return manifests
}

export function find<T>(manifests: Manifest[], kind: string, name?: string): T {
  const found = manifests.filter(
    (m) => m.kind === kind && (name === undefined || m.metadata.name === name),
  )
  assert.equal(found.length, 1, `one ${kind}${name ? ` ${name}` : ''}`)
  return found[0] as unknown as T
}

export function kinds(manifests: Manifest[]): string[] {
  return manifests.map((m) => `${m.kind}/${m.metadata.name}`).sort()
}

export function podSpec(workload: IDeployment | IJob): IPodSpec {
  const spec = workload.spec?.template.spec
  assert.ok(spec, 'a pod template')
  return spec
}

export function container(workload: IDeployment | IJob): IContainer {
  const containers = podSpec(workload).containers
  assert.equal(containers.length, 1, 'one container')
  return containers[0] as IContainer
}

/** The Dockerfile's settings: its ENV lines and the USER it runs as. */
export const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
const imageEnv: Record<string, string> = Object.fromEntries(
  [...(/^ENV ([\s\S]*?)\n(?!\s)/m.exec(dockerfile)?.[1] ?? '').matchAll(/(\w+)=(\S+)/g)].map(
    ([, name, value]) => [name as string, value as string],
  ),
)
export const imageUser = /^USER (\d+):(\d+)$/m.exec(dockerfile)
const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string
}

/** A container's literal environment, over the image's. */
export function environment(c: IContainer): Record<string, string> {
  const env: Record<string, string> = { ...imageEnv }
  for (const variable of c.env ?? []) {
    if (variable.value !== undefined) env[variable.name] = variable.value
  }
  return env
}

/** A port as a probe or a policy names it (number or name), as the container's number. */
export function portNumber(c: IContainer, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port
  return c.ports?.find((p) => p.name === port)?.containerPort
}

export function probePath(c: IContainer, probe: IProbe | undefined): string {
  assert.ok(probe?.httpGet, 'an HTTP probe')
  return `${portNumber(c, probe.httpGet.port)}${probe.httpGet.path}`
}

/** Bytes of a Kubernetes quantity such as 384Mi or 256M. */
export function bytes(quantity: string | number | undefined): number {
  const match = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(String(quantity))
  assert.ok(match, `a memory quantity: ${quantity}`)
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }
  return Number(match[1]) * (match[2] ? unit[match[2] as keyof typeof unit] : 1)
}

/** kubelet's default log rotation: 5 files (containerLogMaxFiles) of 10Mi (containerLogMaxSize). */
const KUBELET_LOGS = 5 * 10 * 2 ** 20

/**
 * Ephemeral storage requested and limited (kube-score): the limit holds /tmp's emptyDir at its
 * sizeLimit and kubelet's rotated log, so that only a pod writing far more is evicted.
 */
export function assertEphemeralStorage(workload: IDeployment | IJob): void {
  const c = container(workload)
  const request = bytes(c.resources?.requests?.['ephemeral-storage'])
  const limit = bytes(c.resources?.limits?.['ephemeral-storage'])
  const tmp = podSpec(workload).volumes?.find((v) => v.name === 'tmp')?.emptyDir?.sizeLimit
  assert.ok(request > 0 && request <= limit, 'ephemeral-storage: a request up to the limit')
  assert.ok(limit >= bytes(tmp) + KUBELET_LOGS, "the limit holds /tmp's sizeLimit and the log")
}

/** Seconds of the preStop hook's `sleep`, exec or sleep action. */
export function preStopSeconds(c: IContainer): number {
  const hook = c.lifecycle?.preStop
  if (hook?.sleep) return hook.sleep.seconds
  const command = hook?.exec?.command ?? []
  return command[0] === 'sleep' ? Number(command[1]) : 0
}

/** The container runs as the image's non-root user, read-only, with nothing to escalate. */
export function assertLockedDown(workload: IDeployment | IJob): void {
  const pod = podSpec(workload).securityContext ?? {}
  const c = container(workload).securityContext ?? {}
  const uid = c.runAsUser ?? pod.runAsUser
  assert.equal(c.runAsNonRoot ?? pod.runAsNonRoot, true, 'runAsNonRoot')
  assert.equal(String(uid), imageUser?.[1], "the Dockerfile's USER")
  assert.equal(String(c.runAsGroup ?? pod.runAsGroup), imageUser?.[2], "the Dockerfile's group")
  assert.equal(c.readOnlyRootFilesystem, true, 'readOnlyRootFilesystem')
  assert.equal(c.allowPrivilegeEscalation, false, 'allowPrivilegeEscalation')
  assert.deepEqual(c.capabilities?.drop, ['ALL'], 'capabilities drop ALL')
  assert.equal(c.capabilities?.add, undefined, 'no capability added')
  assert.equal((c.seccompProfile ?? pod.seccompProfile)?.type, 'RuntimeDefault', 'seccomp')
  assert.equal(c.privileged, undefined)
  assert.equal(podSpec(workload).automountServiceAccountToken, false, 'no API token')
  // Node's compile cache goes to /tmp (D25): writable there, on an emptyDir.
  const tmp = container(workload).volumeMounts?.find((mount) => mount.mountPath === '/tmp')
  const volume = podSpec(workload).volumes?.find((v) => v.name === tmp?.name)
  assert.ok(volume?.emptyDir, '/tmp on an emptyDir')
}

/** Every secretKeyRef names a Secret of the render and a key it holds, unless optional. */
export function assertSecretRefs(manifests: Manifest[], workload: IDeployment | IJob): void {
  for (const variable of container(workload).env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef
    if (ref === undefined) continue
    const secret = find<ISecret>(manifests, 'Secret', ref.name)
    const keys = Object.keys({ ...secret.data, ...secret.stringData })
    assert.ok(
      keys.includes(ref.key) || ref.optional === true,
      `${variable.name}: the Secret ${ref.name} has no ${ref.key}, and the reference is required`,
    )
    assert.equal(ref.key, variable.name, 'each variable under its own name in the Secret')
  }
}

/**
 * The keys come from the Secret as a file (PETSTORE_API_KEYS_FILE), never as a variable, which
 * `ps e`, /proc and crash reports show; the Secret holds the key, so the file is always there.
 */
export function assertKeysFile(manifests: Manifest[], deployment: IDeployment): void {
  const c = container(deployment)
  assert.equal(
    c.env?.find((v) => v.name === 'PETSTORE_API_KEYS'),
    undefined,
    'no keys in the environment',
  )
  const file = c.env?.find((v) => v.name === 'PETSTORE_API_KEYS_FILE')?.value ?? ''
  const mount = c.volumeMounts?.find((m) => file.startsWith(`${m.mountPath}/`))
  assert.ok(mount, `a volume holds ${file}`)
  assert.equal(mount.readOnly, true)
  const source = podSpec(deployment).volumes?.find((v) => v.name === mount.name)?.secret
  const item = source?.items?.find((i) => file === `${mount.mountPath}/${i.path}`)
  assert.equal(item?.key, 'PETSTORE_API_KEYS')
  assert.equal(source?.optional, undefined, 'a Secret without it stops the start')
  assert.equal((source?.defaultMode ?? 0o644) & 0o007, 0, 'readable by no other user')
  const secret = find<ISecret>(manifests, 'Secret', source?.secretName)
  assert.ok('PETSTORE_API_KEYS' in { ...secret.data, ...secret.stringData })
}

export function assertApiPod(manifests: Manifest[]): IDeployment {
  const deployment = find<IDeployment>(manifests, 'Deployment', 'petstore')
  const c = container(deployment)
  const env = environment(c)
  // The ports the image listens on, by name.
  assert.equal(portNumber(c, 'http'), Number(env.PORT), "the API's port, PORT")
  assert.equal(portNumber(c, 'probes'), Number(env.PROBE_PORT), 'the probe port, PROBE_PORT')
  assert.equal(portNumber(c, 'probes'), 8081)
  assert.equal(portNumber(c, 'metrics'), Number(env.METRICS_PORT ?? configDefaults.METRICS_PORT))
  assert.equal(env.PROBE_HOST, '0.0.0.0', 'kubelet probes the pod address')
  assert.equal(env.METRICS_HOST, '0.0.0.0', 'Prometheus scrapes the pod address')
  // The probes: on the probe port, liveness and startup on /healthz, readiness on /readyz.
  assert.equal(probePath(c, c.startupProbe), '8081/healthz')
  assert.equal(probePath(c, c.livenessProbe), '8081/healthz')
  assert.equal(probePath(c, c.readinessProbe), '8081/readyz')
  assert.equal(c.readinessProbe?.periodSeconds, 1, 'readiness asked as often as it is checked')
  assert.ok((c.readinessProbe?.failureThreshold ?? 3) >= 3, 'a few periods before it is out')
  assert.ok((c.livenessProbe?.timeoutSeconds ?? 1) >= 1)
  // Liveness fails 10 s after the loop stalls; its misses must outlast a busy moment.
  assert.ok(
    (c.livenessProbe?.periodSeconds ?? 10) * (c.livenessProbe?.failureThreshold ?? 3) >= 20,
    'liveness gives a stall 20 s or more before a restart',
  )
  // The stop: a preStop wait, then SIGTERM and the drain, within the grace period.
  const grace = podSpec(deployment).terminationGracePeriodSeconds ?? 30
  assert.ok(preStopSeconds(c) > 0, 'a preStop wait while the endpoint is removed')
  assert.ok(
    grace > preStopSeconds(c) + DRAIN_MS / 1000,
    `terminationGracePeriodSeconds ${grace} > preStop ${preStopSeconds(c)} s + drain ${DRAIN_MS / 1000} s`,
  )
  assertLockedDown(deployment)
  assert.equal(podSpec(deployment).enableServiceLinks, false, 'no <SERVICE>_PORT variables')
  // Memory (docs/container.md, D25): V8 capped at half a limit below 512 MB.
  const limit = bytes(c.resources?.limits?.memory)
  const request = bytes(c.resources?.requests?.memory)
  assert.ok(request >= 160e6 && request <= limit, 'request: the 150 MB under load, up to the limit')
  const oldSpace = /--max-old-space-size=(\d+)/.exec(env.NODE_OPTIONS ?? '')?.[1]
  if (limit < 512 * 2 ** 20) {
    assert.ok(oldSpace, 'NODE_OPTIONS=--max-old-space-size under a limit below 512 MB')
    assert.ok(Number(oldSpace) * 2 ** 20 <= limit / 2, 'at most half the limit')
  }
  assert.equal(c.resources?.limits?.cpu, undefined, 'no CPU limit')
  assertEphemeralStorage(deployment)
  assert.equal(c.image, `petstore:${version}`, "the project's version (package.json)")
  assert.deepEqual(c.args, ['serve'])
  assertSecretRefs(manifests, deployment)
  assertKeysFile(manifests, deployment)
  // Every setting the pod gives literally is one the service accepts (the keys' file as the
  // Secret fills it, checked apart).
  assert.doesNotThrow(() => loadConfig({ ...environment(c), PETSTORE_API_KEYS_FILE: '' }))
  return deployment
}

/** The kube-dns pods of kube-system: the DNS rule's only peers. */
const KUBE_DNS = [
  {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
    podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
  },
]

/**
 * A policy's egress (issue 53): DNS to kube-dns on 53 UDP and TCP, then exactly `ports`, each
 * TCP; every rule names its ports, since a rule without ports would open them all.
 */
export function assertEgress(policy: INetworkPolicy, ports: number[]): void {
  assert.ok(policy.spec?.policyTypes?.includes('Egress'), 'egress is restricted')
  const rules = policy.spec?.egress ?? []
  for (const rule of rules) assert.ok(rule.ports && rule.ports.length > 0, 'each names its ports')
  const dns = rules.filter((rule) => rule.ports?.some((p) => p.port === 53))
  assert.equal(dns.length, 1, 'one DNS rule')
  assert.deepEqual(dns[0]?.to, KUBE_DNS, 'DNS to kube-dns only')
  assert.deepEqual(
    dns[0]?.ports?.map((p) => p.protocol),
    ['UDP', 'TCP'],
  )
  const others = rules.filter((rule) => rule !== dns[0]).flatMap((rule) => rule.ports ?? [])
  assert.ok(others.every((p) => p.protocol === 'TCP'))
  assert.deepEqual(
    others.map((p) => p.port),
    ports,
  )
}

/** The port of a Secret's URL placeholder (`REPLACE ME: postgres://…@host:5432/…`). */
export function placeholderPort(value: string | undefined): number {
  const port = /@[^:/]+:(\d+)\//.exec(value ?? '')?.[1]
  assert.ok(port, `a port in ${value}`)
  return Number(port)
}

export function assertNetwork(manifests: Manifest[], deployment: IDeployment): void {
  const c = container(deployment)
  const labels = deployment.spec?.template.metadata?.labels ?? {}
  const selects = (selector: Record<string, string> | undefined) =>
    Object.entries(selector ?? {}).every(([key, value]) => labels[key] === value)
  // The Service: the API's port only, to the pods.
  const service = find<IService>(manifests, 'Service', 'petstore')
  assert.ok(selects(service.spec?.selector), "the Service selects the Deployment's pods")
  const servicePorts = service.spec?.ports ?? []
  assert.deepEqual(
    servicePorts.map((port) => portNumber(c, port.targetPort)),
    [8080],
    "the Service exposes the API's port and nothing else",
  )
  // The NetworkPolicy: the API's port from anywhere, metrics from monitoring, probes from no pod.
  const policy = find<INetworkPolicy>(manifests, 'NetworkPolicy', 'petstore')
  assert.ok(selects(policy.spec?.podSelector?.matchLabels), 'the policy selects the pods')
  assert.deepEqual(policy.spec?.policyTypes, ['Ingress', 'Egress'])
  const rules = policy.spec?.ingress ?? []
  const opened = rules.map((rule) => {
    assert.ok(rule.ports && rule.ports.length > 0, 'every rule names its ports')
    return { from: rule.from, ports: rule.ports.map((p) => portNumber(c, p.port)) }
  })
  const api = opened.filter((rule) => rule.ports.includes(8080))
  assert.deepEqual(api, [{ from: undefined, ports: [8080] }], "the API's port, from anywhere")
  const metrics = opened.filter((rule) => rule.ports.includes(portNumber(c, 'metrics')))
  assert.equal(metrics.length, 1)
  assert.deepEqual(metrics[0]?.from, [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    },
  ])
  assert.ok(
    opened.every((rule) => !rule.ports.includes(8081)),
    'no rule opens the probe port: kubelet reaches it from the node',
  )
  assert.deepEqual(
    opened.flatMap((rule) => rule.ports).sort(),
    [8080, portNumber(c, 'metrics')].sort(),
    'only the API and metrics ports',
  )
}
