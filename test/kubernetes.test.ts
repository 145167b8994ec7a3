// deploy/kubernetes/: both variants rendered as `kubectl apply -k` would (test/image/kustomize.ts),
// every object checked against Kubernetes' schemas (kubernetes-models), then what matters of
// them held against the image, the configuration and the docs: the probe port and paths, a grace
// period longer than the drain, the read-only non-root container, the Secret's keys, the ports
// the NetworkPolicy opens, one pod and a volume on SQLite, the migration Job on PostgreSQL. The
// monitoring component (D31) on each: its PrometheusRule and PodMonitor checked against the
// Prometheus Operator's schemas (@kubernetes-models/prometheus-operator).
// Nothing is started; `npm run test:image` runs the SQLite variant's pod with podman.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import type {
  IPodMonitor,
  IPrometheusRule,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import type { IDeployment } from 'kubernetes-models/apps/v1'
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import type { IJob } from 'kubernetes-models/batch/v1'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1'
import type { IConfigMap, IPersistentVolumeClaim, ISecret } from 'kubernetes-models/v1'
import { parse } from 'yaml'
import { COMPONENT, DASHBOARD_FILE, RULES_FILE } from '../scripts/monitoring/files.ts'
import { JOB } from '../scripts/monitoring/settings.ts'
import { ConfigError, configDefaults, loadConfig } from '../src/config.ts'
import {
  assertApiPod,
  assertEgress,
  assertEphemeralStorage,
  assertLockedDown,
  assertNetwork,
  assertSecretRefs,
  container,
  dockerfile,
  environment,
  find,
  imageUser,
  kinds,
  placeholderPort,
  podSpec,
  portNumber,
  validated,
} from './helpers/kubernetes-manifests.ts'
import { ROOT } from './image/commands.ts'
import {
  applyImages,
  applyOperation,
  KUBERNETES,
  type Manifest,
  parseYaml,
  render,
} from './image/kustomize.ts'

const postgres = validated(render(join(KUBERNETES, 'overlays', 'postgres')))
const sqlite = validated(render(join(KUBERNETES, 'overlays', 'sqlite')))
const podman = validated(render(join(KUBERNETES, 'overlays', 'podman')))

describe('deploy/kubernetes, PostgreSQL: the overlay as kubectl apply -k renders it', () => {
  it('egress: the pods reach DNS, the collector, the database and Redis; the Job DNS and the database', () => {
    const policy = find<INetworkPolicy>(postgres, 'NetworkPolicy', 'petstore')
    assertEgress(policy, [4318, 5432, 6432, 6379, 6380])
    // The ports the Secrets' placeholders name are open.
    const values = find<ISecret>(postgres, 'Secret', 'petstore').stringData ?? {}
    const opened = (policy.spec?.egress ?? []).flatMap((rule) => rule.ports?.map((p) => p.port))
    assert.ok(opened.includes(placeholderPort(values.DATABASE_URL)))
    assert.ok(opened.includes(placeholderPort(values.REDIS_URL)))
    // The Job's pod, which holds the owner's credentials: DNS and the database, no way in.
    const job = find<IJob>(postgres, 'Job', 'petstore-migrate')
    const migrate = find<INetworkPolicy>(postgres, 'NetworkPolicy', 'petstore-migrate')
    const labels = job.spec?.template.metadata?.labels ?? {}
    const selector = migrate.spec?.podSelector?.matchLabels ?? {}
    assert.ok(Object.entries(selector).every(([key, value]) => labels[key] === value))
    assert.deepEqual(migrate.spec?.policyTypes, ['Ingress', 'Egress'])
    assert.deepEqual(migrate.spec?.ingress, [], 'nothing connects to the Job')
    assertEgress(migrate, [5432, 6432])
  })

  it('holds the Deployment, its Service, NetworkPolicy, Secret, autoscaler, budget and Job', () => {
    assert.deepEqual(kinds(postgres), [
      'Deployment/petstore',
      'HorizontalPodAutoscaler/petstore',
      'Job/petstore-migrate',
      'NetworkPolicy/petstore',
      'NetworkPolicy/petstore-migrate',
      'PodDisruptionBudget/petstore',
      'Secret/petstore',
      'Secret/petstore-migrate',
      'Service/petstore',
    ])
  })

  it('the pods: probes, the stop, security, memory, secrets; the Service and the policy', () => {
    const deployment = assertApiPod(postgres)
    assertNetwork(postgres, deployment)
    const env = container(deployment).env ?? []
    assert.equal(
      env.find((v) => v.name === 'PETSTORE_MIGRATE')?.value,
      'off',
      'only the Job migrates',
    )
    const url = env.find((v) => v.name === 'DATABASE_URL')
    assert.equal(url?.valueFrom?.secretKeyRef?.optional, undefined, 'DATABASE_URL is required')
    assert.equal(url?.valueFrom?.secretKeyRef?.key, 'DATABASE_URL')
  })

  it('the Job migrates as the owner, the pods serve as the runtime role: two credentials (D27)', () => {
    const secretOf = (workload: IDeployment | IJob) =>
      container(workload).env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef?.name
    const job = secretOf(find<IJob>(postgres, 'Job', 'petstore-migrate'))
    const pods = secretOf(find<IDeployment>(postgres, 'Deployment', 'petstore'))
    assert.equal(job, 'petstore-migrate')
    assert.equal(pods, 'petstore')
    // Nothing of the owner's Secret reaches the pods, by a variable or a volume.
    const deployment = find<IDeployment>(postgres, 'Deployment', 'petstore')
    assert.ok(!JSON.stringify(podSpec(deployment)).includes('petstore-migrate'))
    const owner = find<ISecret>(postgres, 'Secret', 'petstore-migrate')
    assert.deepEqual(Object.keys({ ...owner.data, ...owner.stringData }), ['DATABASE_URL'])
    // The runtime role's privileges come from deploy/postgresql/grants.sql, run after the Job.
    const instructions = readFileSync(
      join(KUBERNETES, 'overlays', 'postgres', 'kustomization.yaml'),
      'utf8',
    )
    const steps = instructions.split('\n').filter((line) => /^# {3}\S/.test(line))
    const grants = steps.findIndex((line) => line.includes('-f deploy/postgresql/grants.sql'))
    assert.ok(grants > steps.findIndex((line) => line.includes('kubectl wait')))
    assert.ok(grants < steps.findLastIndex((line) => line.includes('kubectl apply -k')))
  })

  it('three pods or more, replaced one at a time, within PostgreSQL’s connections', () => {
    const deployment = find<IDeployment>(postgres, 'Deployment', 'petstore')
    // No replicas: every apply would reset the autoscaler's count to it.
    assert.equal(deployment.spec?.replicas, undefined)
    assert.equal(deployment.spec?.strategy?.type, 'RollingUpdate')
    assert.equal(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable, 0)
    const surge = Number(deployment.spec?.strategy?.rollingUpdate?.maxSurge)
    const hpa = find<IHorizontalPodAutoscaler>(postgres, 'HorizontalPodAutoscaler')
    assert.deepEqual(hpa.spec?.scaleTargetRef, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'petstore',
    })
    assert.equal(hpa.spec?.minReplicas, 3)
    assert.equal(hpa.spec?.metrics?.[0]?.resource?.name, 'cpu')
    const pool = Number(configDefaults.DATABASE_POOL_SIZE)
    // max_connections 100, less 3 reserved; the Job's or a CLI command's connection besides.
    assert.ok(((hpa.spec?.maxReplicas ?? 0) + surge) * pool + 1 <= 97, 'within max_connections')
    const budget = find<IPodDisruptionBudget>(postgres, 'PodDisruptionBudget')
    assert.deepEqual(budget.spec?.selector?.matchLabels, deployment.spec?.selector.matchLabels)
    assert.equal(budget.spec?.maxUnavailable, 1)
  })

  it('the Job runs `petstore migrate` from the same image, in the same environment', () => {
    const job = find<IJob>(postgres, 'Job', 'petstore-migrate')
    const deployment = find<IDeployment>(postgres, 'Deployment', 'petstore')
    const c = container(job)
    // The image's ENTRYPOINT is `node /app/bin/petstore.js`: args are its command.
    assert.match(dockerfile, /^ENTRYPOINT \["node", "\/app\/bin\/petstore\.js"\]$/m)
    assert.equal(c.command, undefined)
    assert.deepEqual(c.args, ['migrate'])
    assert.equal(c.image, container(deployment).image)
    assert.equal(podSpec(job).restartPolicy, 'Never')
    assert.ok(
      (job.spec?.backoffLimit ?? 6) >= 1,
      'a start that cannot reach the database is retried',
    )
    assert.equal(
      c.env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef?.key,
      'DATABASE_URL',
    )
    assert.equal(
      c.env?.find((v) => v.name === 'PETSTORE_MIGRATE'),
      undefined,
    )
    // D29: the Job's first migration records its PETSTORE_ENV in a new database; a staging
    // cluster's Job that said production would leave the staging commands refusing it.
    const envOf = (workload: IDeployment | IJob) =>
      container(workload).env?.find((v) => v.name === 'PETSTORE_ENV')?.value
    assert.equal(envOf(job), 'production')
    assert.equal(envOf(job), envOf(deployment), 'the Job and the pods name one environment')
    assertLockedDown(job)
    assertEphemeralStorage(job)
    assertSecretRefs(postgres, job)
    // A finished Job goes by itself, once `kubectl wait` and a look at its log had time.
    const ttl = job.spec?.ttlSecondsAfterFinished
    assert.ok(ttl !== undefined && ttl >= 3600, 'ttlSecondsAfterFinished, an hour or more')
    // The first step applies the Secret and the Job only (the kustomization's instructions).
    const firstStep = postgres.filter((m) =>
      ['config', 'migration'].includes(m.metadata.labels?.['app.kubernetes.io/component'] ?? ''),
    )
    assert.deepEqual(kinds(firstStep), [
      'Job/petstore-migrate',
      'NetworkPolicy/petstore-migrate',
      'Secret/petstore',
      'Secret/petstore-migrate',
    ])
    const instructions = readFileSync(
      join(KUBERNETES, 'overlays', 'postgres', 'kustomization.yaml'),
      'utf8',
    )
    assert.ok(instructions.includes("-l 'app.kubernetes.io/component in (config,migration)'"))
  })

  it("the Secrets' placeholders are refused at start, each naming its variable", () => {
    const secret = find<ISecret>(postgres, 'Secret', 'petstore')
    const values = secret.stringData ?? {}
    assert.deepEqual(Object.keys(values).sort(), ['DATABASE_URL', 'PETSTORE_API_KEYS', 'REDIS_URL'])
    const owner = find<ISecret>(postgres, 'Secret', 'petstore-migrate').stringData ?? {}
    for (const [name, value] of [...Object.entries(values), ...Object.entries(owner)]) {
      assert.match(value, /REPLACE ME/, `${name} is marked as a placeholder`)
      assert.throws(
        () => loadConfig({ DATABASE_URL: 'sqlite::memory:', [name]: value }),
        (error: unknown) => error instanceof ConfigError && error.message.startsWith(name),
        `${name}'s placeholder stops the start with a line naming it`,
      )
    }
  })
})

describe('deploy/kubernetes, SQLite: the overlay as kubectl apply -k renders it', () => {
  it('egress: DNS and the collector only (the database is a file)', () => {
    assertEgress(find<INetworkPolicy>(sqlite, 'NetworkPolicy', 'petstore'), [4318])
  })

  it('holds the Deployment, its Service, NetworkPolicy, Secret and volume; no autoscaler, budget or Job', () => {
    assert.deepEqual(kinds(sqlite), [
      'Deployment/petstore',
      'NetworkPolicy/petstore',
      'PersistentVolumeClaim/petstore-data',
      'Secret/petstore',
      'Service/petstore',
    ])
    // Optional keys only: the pod starts with the Secret as it is.
    const secret = find<ISecret>(sqlite, 'Secret', 'petstore')
    assert.deepEqual({ ...secret.data, ...secret.stringData }, { PETSTORE_API_KEYS: '' })
  })

  it('the pod: probes, the stop, security, memory, secrets; the Service and the policy', () => {
    assertNetwork(sqlite, assertApiPod(sqlite))
  })

  it('one pod, the old one gone before the new one starts, on the volume that holds the file', () => {
    const deployment = find<IDeployment>(sqlite, 'Deployment', 'petstore')
    assert.equal(deployment.spec?.replicas, 1)
    assert.equal(deployment.spec?.strategy?.type, 'Recreate')
    const c = container(deployment)
    const env = environment(c)
    assert.notEqual(env.PETSTORE_MIGRATE, 'off', 'the pod migrates as it starts')
    const database = loadConfig({ ...env, PETSTORE_API_KEYS_FILE: '' }).database
    assert.equal(database.engine, 'sqlite')
    assert.ok(database.engine === 'sqlite')
    const folder = dirname(database.path)
    const mount = c.volumeMounts?.find((m) => m.mountPath === folder)
    assert.ok(mount, `a volume at ${folder}, the DATABASE_URL's folder`)
    assert.equal(mount.readOnly, undefined)
    const volume = podSpec(deployment).volumes?.find((v) => v.name === mount.name)
    const claim = find<IPersistentVolumeClaim>(
      sqlite,
      'PersistentVolumeClaim',
      volume?.persistentVolumeClaim?.claimName,
    )
    assert.ok(
      claim.spec?.accessModes?.every(
        (mode) => mode === 'ReadWriteOnce' || mode === 'ReadWriteOncePod',
      ),
      "a disk of one node's",
    )
    // The volume is made writable for the image's group.
    assert.equal(String(podSpec(deployment).securityContext?.fsGroup), imageUser?.[2])
  })
})

describe('deploy/kubernetes, podman: the SQLite overlay as podman kube play runs it', () => {
  it('is the SQLite overlay but for ports on loopback at their own numbers, and no Secret file', () => {
    const expected = structuredClone(find<IDeployment>(sqlite, 'Deployment', 'petstore'))
    const spec = podSpec(expected)
    const c = container(expected)
    const hostPorts: Record<string, number> = { http: 18080, probes: 18081, metrics: 19464 }
    c.ports = c.ports?.map((port) => ({
      ...port,
      hostIP: '127.0.0.1',
      hostPort: hostPorts[port.name ?? ''] ?? 0,
    }))
    c.env = c.env?.filter((variable) => variable.name !== 'PETSTORE_API_KEYS_FILE')
    c.volumeMounts = c.volumeMounts?.filter((mount) => mount.name !== 'api-keys')
    spec.volumes = spec.volumes?.filter((volume) => volume.name !== 'api-keys')
    assert.deepEqual(find<IDeployment>(podman, 'Deployment', 'petstore'), expected)
    // Everything else as the SQLite overlay has it.
    assert.deepEqual(
      podman.filter((m) => m.kind !== 'Deployment'),
      sqlite.filter((m) => m.kind !== 'Deployment'),
    )
  })
})

describe('test/image/kustomize.ts renders as kustomize does', () => {
  it("`images:` points the Deployment and the Job at a registry's image", () => {
    const manifests = render(join(KUBERNETES, 'overlays', 'postgres'))
    applyImages(manifests, [
      { name: 'petstore', newName: 'registry.example.com/team/petstore', newTag: '1.0.1' },
    ])
    const images = [find<IJob>(manifests, 'Job'), find<IDeployment>(manifests, 'Deployment')].map(
      (workload) => container(workload).image,
    )
    assert.deepEqual(images, [
      'registry.example.com/team/petstore:1.0.1',
      'registry.example.com/team/petstore:1.0.1',
    ])
  })

  it("each overlay's registry example pins the image by digest, for every workload", () => {
    // A tag can be pushed again; under imagePullPolicy: IfNotPresent a node keeps what it pulled.
    const digest = `sha256:${'a'.repeat(64)}`
    for (const variant of ['postgres', 'sqlite']) {
      const folder = join(KUBERNETES, 'overlays', variant)
      const text = readFileSync(join(folder, 'kustomization.yaml'), 'utf8')
      const example = text.slice(text.indexOf('# images:')).replace(/^# ?/gm, '')
      const [parsed] = parseYaml(example.replace('sha256:…', digest), variant) as {
        images: { name: string; newName?: string; newTag?: string; digest?: string }[]
      }[]
      assert.equal(parsed?.images[0]?.digest, digest, `${variant}: the example names a digest`)
      const manifests = applyImages(render(folder), parsed?.images ?? [])
      const workloads = manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job')
      for (const workload of workloads) {
        const image = container(workload as unknown as IDeployment).image ?? ''
        assert.ok(image.endsWith(`@${digest}`), `${variant} ${workload.kind}: ${image}`)
      }
    }
  })

  it('a JSON patch whose path is not there fails, as kustomize does', () => {
    const document = { spec: { containers: [{ env: [] }] } }
    applyOperation(document, { op: 'add', path: '/spec/containers/0/env/-', value: 1 }, 'test')
    assert.deepEqual(document.spec.containers[0]?.env, [1])
    assert.throws(
      () => applyOperation(document, { op: 'add', path: '/spec/containers/1/env/-' }, 'test'),
      /no item 1/,
    )
    assert.throws(() =>
      applyOperation(document, { op: 'replace', path: '/spec/x', value: 1 }, 'test'),
    )
  })

  it('a JSON patch `test` that fails stops the rendering, as kustomize does', () => {
    const document = { env: [{ name: 'A' }] }
    applyOperation(document, { op: 'test', path: '/env/0/name', value: 'A' }, 'test')
    assert.throws(
      () => applyOperation(document, { op: 'test', path: '/env/0/name', value: 'B' }, 'test'),
      /test of \/env\/0\/name failed: "A"/,
    )
  })

  it('reads YAML as Kubernetes does (1.1): a bare `off` is a boolean, which the schema refuses', () => {
    const [env] = parseYaml('name: PETSTORE_MIGRATE\nvalue: off\n', 'test')
    assert.deepEqual(env, { name: 'PETSTORE_MIGRATE', value: false })
    const broken = structuredClone(render(join(KUBERNETES, 'overlays', 'postgres')))
    const deployment = broken.find((m) => m.kind === 'Deployment') as Manifest
    applyOperation(
      deployment,
      { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: env },
      'test',
    )
    assert.throws(() => validated(broken), /Deployment petstore is not valid: .*must be string/)
  })
})

describe('deploy/kubernetes/components/monitoring on each overlay (D31)', () => {
  const component = join(ROOT, COMPONENT)
  const variants = {
    postgres: {
      plain: postgres,
      monitored: validated(render(join(KUBERNETES, 'overlays', 'postgres'), [component])),
    },
    sqlite: {
      plain: sqlite,
      monitored: validated(render(join(KUBERNETES, 'overlays', 'sqlite'), [component])),
    },
  }

  it('adds a PodMonitor, a PrometheusRule and the dashboard, and changes nothing else', () => {
    for (const { plain, monitored } of Object.values(variants)) {
      assert.deepEqual(
        kinds(monitored),
        [
          ...kinds(plain),
          'ConfigMap/petstore-dashboard',
          'PodMonitor/petstore',
          'PrometheusRule/petstore',
        ].sort(),
      )
      const added = new Set(['ConfigMap', 'PodMonitor', 'PrometheusRule'])
      assert.deepEqual(
        monitored.filter((m) => !added.has(m.kind)),
        plain,
        'the overlay’s own objects as they were',
      )
    }
  })

  it('the PrometheusRule holds the rule file as it is, and the ConfigMap the dashboard', () => {
    const rules = parse(readFileSync(join(ROOT, RULES_FILE), 'utf8')) as unknown
    const dashboard = readFileSync(join(ROOT, DASHBOARD_FILE), 'utf8')
    for (const { monitored } of Object.values(variants)) {
      assert.deepEqual(find<IPrometheusRule>(monitored, 'PrometheusRule').spec, rules)
      const configMap = find<IConfigMap>(monitored, 'ConfigMap', 'petstore-dashboard')
      assert.equal(configMap.data?.['petstore.json'], dashboard)
      assert.equal(configMap.metadata?.labels?.grafana_dashboard, '1', "Grafana's sidecar label")
    }
  })

  it("the Operator's schema refuses a rule it would refuse (a `for` that is no duration)", () => {
    const broken = structuredClone(variants.sqlite.monitored)
    const rule = broken.find((m) => m.kind === 'PrometheusRule') as Manifest
    applyOperation(
      rule,
      { op: 'replace', path: '/spec/groups/1/rules/0/for', value: 'two minutes' },
      'test',
    )
    assert.throws(() => validated(broken), /PrometheusRule petstore is not valid: .*for must match/)
  })

  it('the PodMonitor scrapes the pods’ metrics port as job petstore; only the monitoring namespace may', () => {
    for (const { monitored } of Object.values(variants)) {
      const monitor = find<IPodMonitor>(monitored, 'PodMonitor')
      const deployment = find<IDeployment>(monitored, 'Deployment', 'petstore')
      const labels = deployment.spec?.template.metadata?.labels ?? {}
      const selector = monitor.spec.selector.matchLabels ?? {}
      assert.ok(Object.keys(selector).length > 0)
      assert.ok(
        Object.entries(selector).every(([key, value]) => labels[key] === value),
        'selects the pods',
      )
      const [endpoint] = monitor.spec.podMetricsEndpoints ?? []
      assert.equal(endpoint?.port, 'metrics')
      assert.equal(endpoint?.path, '/metrics')
      assert.ok(
        portNumber(container(deployment), endpoint?.port) !== undefined,
        'a port of the pod',
      )
      assert.deepEqual(endpoint?.relabelings, [
        { action: 'replace', targetLabel: 'job', replacement: JOB },
      ])
      // The policy lets the monitoring namespace's Prometheus reach that port, and no one else.
      assertNetwork(monitored, deployment)
    }
  })
})
