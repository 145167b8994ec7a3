// deploy/kubernetes/overlays/cloudnative-pg/: the third variant, rendered as `kubectl apply -k`
// would (test/image/kustomize.ts). Kubernetes' own kinds are checked against their schemas
// (kubernetes-models, as test/kubernetes.test.ts does); CloudNativePG's Cluster and Pooler, whose
// definitions kubernetes-models lacks, against @kubernetes-models/cloudnative-pg 2.0.0, models
// generated from CloudNativePG 1.29.0's Go API with its validation markers (types, enums,
// required fields, minimums, quantities). That generator leaves out the CRDs' CEL rules and the
// operator's admission webhook, so the rules of those that bear on these objects are checked
// here by hand, each next to the rule it restates; and, as with kubernetes-models, an unknown
// field is not refused, so the fields that matter are compared whole.
//
// Then the properties across files: the pods' DATABASE_URL on the pooler's Service (named after
// the Pooler) as the runtime role the Cluster manages, over TLS the operator's certificate
// answers for; the migration Job on the `-rw` Service as the owner, with the Secret the
// operator makes; the sizing of PgBouncer and PostgreSQL against the autoscaler; egress to the
// operator's pods only; the order of the instructions. No operator runs here (the overlay's
// README.md says what was run and what was only validated).
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import {
  Cluster,
  type ICluster,
} from '@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1/Cluster'
import {
  type IPooler,
  Pooler,
} from '@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1/Pooler'
import type { IDeployment } from 'kubernetes-models/apps/v1'
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import type { IJob } from 'kubernetes-models/batch/v1'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1'
import type { IContainer, ISecret } from 'kubernetes-models/v1'
import { ConfigError, configDefaults, loadConfig } from '../src/config.ts'
import {
  assertEgress,
  assertEphemeralStorage,
  assertKeysFile,
  assertLockedDown,
  assertNetwork,
  container,
  environment,
  find,
  kinds,
  podSpec,
  SCHEMAS,
  validated,
} from './helpers/kubernetes-manifests.ts'
import { applyImages, KUBERNETES, type Manifest, parseYaml, render } from './image/kustomize.ts'

const FOLDER = join(KUBERNETES, 'overlays', 'cloudnative-pg')

/** Kubernetes' kinds as test/kubernetes.test.ts checks them, and CloudNativePG's two. */
const CNPG_SCHEMAS: Record<string, (manifest: Manifest) => void> = {
  ...SCHEMAS,
  'postgresql.cnpg.io/v1 Cluster': (m) => new Cluster(m as unknown as ICluster).validate(),
  'postgresql.cnpg.io/v1 Pooler': (m) => new Pooler(m as unknown as IPooler).validate(),
}

/**
 * What CloudNativePG 1.29.0 refuses beyond the models' schema, for the fields these objects
 * use: the CRDs' CEL rules (config/crd/bases) and the admission webhook
 * (internal/webhook/v1/cluster_webhook.go, pooler_webhook.go).
 */
function assertAdmitted(cluster: ICluster, pooler: IPooler): void {
  const spec = cluster.spec
  const sync = spec.postgresql?.synchronous
  if (sync !== undefined) {
    const standbyNames = (sync.standbyNamesPre?.length ?? 0) + (sync.standbyNamesPost?.length ?? 0)
    // CRD, synchronous.number: `self > 0`.
    assert.ok(sync.number > 0, 'The number of synchronous replicas should be greater than zero')
    // CRD, synchronous: `preferred` only without standby names.
    assert.ok(sync.dataDurability !== 'preferred' || standbyNames === 0)
    // Webhook: fewer synchronous replicas than instances and standby names.
    assert.ok(
      sync.number < (spec.instances ?? 1) + standbyNames,
      'the number of synchronous replicas must be less than the total number of instances',
    )
    // Webhook: not both this and the legacy minSyncReplicas/maxSyncReplicas.
    assert.ok(!(spec.minSyncReplicas ?? 0) && !(spec.maxSyncReplicas ?? 0), 'legacy sync settings')
    // Webhook: a failover quorum needs more synchronous replicas than standby names.
    if (sync.failoverQuorum === true) assert.ok(sync.number > standbyNames)
  }
  // CRD, spec: `!(has(self.imageCatalogRef) && has(self.imageName))`.
  assert.ok(!(spec.imageCatalogRef && spec.imageName), 'imageName and imageCatalogRef')
  // Webhook: a name of its own, a cluster named, and only the PgBouncer parameters it lets
  // through (a subset of AllowedPgbouncerGenericConfigurationParameters, those this file knows).
  assert.notEqual(pooler.metadata?.name, pooler.spec.cluster.name)
  assert.ok(pooler.spec.cluster.name !== '', 'must specify a cluster name')
  assert.ok(pooler.spec.pgbouncer, 'required pgbouncer configuration')
  const allowed = new Set([
    'default_pool_size',
    'max_client_conn',
    'max_db_connections',
    'query_wait_timeout',
    'reserve_pool_size',
    'server_idle_timeout',
    'server_lifetime',
    'server_login_retry',
  ])
  for (const parameter of Object.keys(pooler.spec.pgbouncer.parameters ?? {})) {
    assert.ok(allowed.has(parameter), `${parameter}: Invalid or reserved parameter`)
  }
}

const manifests = validated(render(FOLDER), CNPG_SCHEMAS)
const postgres = render(join(KUBERNETES, 'overlays', 'postgres'))
const cluster = find<ICluster>(manifests, 'Cluster')
const pooler = find<IPooler>(manifests, 'Pooler')
const clusterName = cluster.metadata.name ?? ''
const poolerName = pooler.metadata.name ?? ''

/** The keys of the Secrets the operator makes (pkg/specs/secrets.go; the CA's, certs). */
const OPERATOR_SECRETS: Record<string, string[]> = {
  [`${clusterName}-app`]: [
    'username',
    'user',
    'password',
    'dbname',
    'host',
    'port',
    'pgpass',
    'uri',
    'jdbc-uri',
    'fqdn-uri',
    'fqdn-jdbc-uri',
  ],
  [`${clusterName}-ca`]: ['ca.crt', 'ca.key'],
}

/** The managed role the pods serve as, and its Secret (a basic-auth one, made by a person). */
const runtimeRole = cluster.spec.managed?.roles?.[0]
const RUNTIME_SECRET = runtimeRole?.passwordSecret?.name ?? ''

/** Values like the real ones: the operator's passwords are 64 letters and digits. */
const SAMPLE_SECRETS: Record<string, Record<string, string>> = {
  [`${clusterName}-app`]: {
    username: cluster.spec.bootstrap?.initdb?.owner ?? '',
    password: 'aB3'.repeat(21).slice(0, 64),
  },
  [RUNTIME_SECRET]: { username: runtimeRole?.name ?? '', password: 'f0'.repeat(32) },
}

/**
 * A container's environment as Kubernetes gives it: Secrets' values from SAMPLE_SECRETS, and
 * `$(NAME)` replaced by a variable defined before it (an unknown name stays as written).
 */
function expanded(c: IContainer): Record<string, string> {
  const env: Record<string, string> = {}
  for (const variable of c.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef
    if (ref !== undefined) {
      const value = SAMPLE_SECRETS[ref.name ?? '']?.[ref.key]
      if (value !== undefined) env[variable.name] = value
      continue
    }
    env[variable.name] = (variable.value ?? '').replace(
      /\$\((\w+)\)/g,
      (whole, name: string) => env[name] ?? whole,
    )
  }
  return env
}

/** The Secret and key of the file `sslrootcert` names, found through the container's mounts. */
function caFile(workload: IDeployment | IJob, path: string): { secret?: string; key?: string } {
  const mount = container(workload).volumeMounts?.find((m) => path.startsWith(`${m.mountPath}/`))
  assert.ok(mount, `a volume holds ${path}`)
  assert.equal(mount.readOnly, true)
  const source = podSpec(workload).volumes?.find((v) => v.name === mount.name)?.secret
  const item = source?.items?.find((i) => path === `${mount.mountPath}/${i.path}`)
  assert.ok(item, `${path} is an item of the volume's Secret`)
  assert.deepEqual(
    source?.items?.map((i) => i.key),
    ['ca.crt'],
    "the CA's certificate only, not its key",
  )
  assert.equal((source?.defaultMode ?? 0o644) & 0o007, 0, 'readable by no other user')
  // Mode 0440 makes the file root's and the pod's fsGroup's: the image's group (1000).
  assert.equal(
    String(podSpec(workload).securityContext?.fsGroup),
    '1000',
    "the pod's group reads it",
  )
  return { secret: source?.secretName, key: item.key }
}

/** The database URL of a workload, as Kubernetes expands it, checked by the service's config. */
function databaseOf(workload: IDeployment | IJob) {
  const env = { ...environment(container(workload)), ...expanded(container(workload)) }
  const config = loadConfig({ ...env, PETSTORE_API_KEYS_FILE: '' }).database
  assert.equal(config.engine, 'postgres')
  assert.ok(config.engine === 'postgres')
  const url = new URL(config.url)
  return { config, url, env }
}

describe('deploy/kubernetes, CloudNativePG: the overlay as kubectl apply -k renders it', () => {
  it('holds the Cluster, its Pooler, the Deployment, its Service, policies, Secret, autoscaler, budgets and Job', () => {
    assert.deepEqual(kinds(manifests), [
      'Cluster/petstore-db',
      'Deployment/petstore',
      'HorizontalPodAutoscaler/petstore',
      'Job/petstore-migrate',
      'NetworkPolicy/petstore',
      'NetworkPolicy/petstore-migrate',
      'PodDisruptionBudget/petstore',
      'PodDisruptionBudget/petstore-db-pooler-rw',
      'Pooler/petstore-db-pooler-rw',
      'Secret/petstore',
      'Service/petstore',
    ])
  })

  it('the Cluster: three instances, a commit on a replica before it is acknowledged, failover with a quorum', () => {
    const spec = cluster.spec
    assert.equal(spec.instances, 3)
    // Compared whole: a misspelt field would be dropped by the API server, not refused here.
    assert.deepEqual(spec.postgresql?.synchronous, {
      method: 'any',
      number: 1,
      dataDurability: 'required',
      failoverQuorum: true,
    })
    assertAdmitted(cluster, pooler)
    // Never two instances on one node: the primary and its synchronous replica lost together.
    assert.deepEqual(spec.affinity, {
      enablePodAntiAffinity: true,
      podAntiAffinityType: 'required',
      topologyKey: 'kubernetes.io/hostname',
    })
    assert.notEqual(spec.enablePDB, false, "the operator's budgets for the instances")
    assert.equal(spec.primaryUpdateMethod, 'switchover')
    // Memory requested as limited; no CPU limit.
    assert.equal(spec.resources?.requests?.memory, spec.resources?.limits?.memory)
    assert.equal(spec.resources?.limits?.cpu, undefined)
    assert.ok(spec.storage?.size && spec.walStorage?.size, 'data and WAL volumes sized')
    // No backup configured: a documented choice (README.md), not a half-made one.
    assert.equal(spec.backup, undefined)
    assert.equal(spec.plugins, undefined)
  })

  it("the schemas refuse what CloudNativePG refuses: the models' validate(), then the rules restated here", () => {
    const broken = (change: (c: ICluster, p: IPooler) => void) => {
      const c = structuredClone(cluster)
      const p = structuredClone(pooler)
      change(c, p)
      return { c, p }
    }
    const schema = (change: (c: ICluster, p: IPooler) => void) => {
      const { c, p } = broken(change)
      validated([c as unknown as Manifest, p as unknown as Manifest], CNPG_SCHEMAS)
    }
    const sync = (c: ICluster) => {
      const s = c.spec.postgresql?.synchronous
      assert.ok(s)
      return s
    }
    assert.throws(
      () => schema((c) => Object.assign(sync(c), { dataDurability: 'always' })),
      /dataDurability must be equal to one of the allowed values/,
    )
    assert.throws(
      () => schema((c) => Object.assign(sync(c), { method: 'all' })),
      /method must be equal to one of the allowed values/,
    )
    assert.throws(
      () => schema((c) => Object.assign(sync(c), { number: '1' })),
      /number must be integer/,
    )
    assert.throws(
      () => schema((c) => Object.assign(c.spec, { instances: 0 })),
      /instances must be >= 1/,
    )
    assert.throws(
      () => schema((_, p) => Object.assign(p.spec, { type: 'ro-ish' })),
      /type must be equal to one of the allowed values/,
    )
    assert.throws(
      () => schema((_, p) => Object.assign(p.spec.pgbouncer ?? {}, { poolMode: 'statement' })),
      /poolMode must be equal to one of the allowed values/,
    )
    assert.throws(
      () =>
        schema((_, p) =>
          Object.assign(p.spec.pgbouncer ?? {}, { parameters: { max_client_conn: 200 } }),
        ),
      /max_client_conn must be string/,
    )
    // The rules the models leave out, restated by assertAdmitted.
    const admitted = (change: (c: ICluster, p: IPooler) => void) => {
      const { c, p } = broken(change)
      assertAdmitted(c, p)
    }
    assert.throws(() => admitted((c) => Object.assign(sync(c), { number: 0 })), /greater than zero/)
    assert.throws(
      () => admitted((c) => Object.assign(sync(c), { number: 3 })),
      /less than the total number of instances/,
    )
    assert.throws(() => admitted((c) => Object.assign(c.spec, { minSyncReplicas: 1 })), /legacy/)
    assert.throws(() => admitted((_, p) => Object.assign(p.metadata ?? {}, { name: clusterName })))
    assert.throws(
      () =>
        admitted((_, p) =>
          Object.assign(p.spec.pgbouncer ?? {}, { parameters: { listen_port: '6432' } }),
        ),
      /listen_port: Invalid or reserved/,
    )
  })

  it('the Pooler: PgBouncer in transaction mode in front of the primary, two pods, a budget of ours', () => {
    assert.equal(pooler.spec.cluster.name, clusterName)
    assert.equal(pooler.spec.type, 'rw', "through the cluster's -rw Service, to the primary")
    assert.equal(pooler.spec.pgbouncer?.poolMode, 'transaction')
    assert.ok((pooler.spec.instances ?? 1) >= 2, 'more than one PgBouncer')
    // The operator's container, by the name it looks for; nothing else in the pod.
    assert.deepEqual(
      pooler.spec.template?.spec?.containers.map((c) => c.name),
      ['pgbouncer'],
    )
    assert.equal(pooler.spec.template?.spec?.containers[0]?.resources?.limits?.cpu, undefined)
    // After a failed connect PgBouncer waits server_login_retry (15 s by default) before the next.
    assert.ok(Number(pooler.spec.pgbouncer?.parameters?.server_login_retry) <= 2)
    // The operator makes no budget for a pooler's pods: ours selects them by its label.
    const budget = find<IPodDisruptionBudget>(manifests, 'PodDisruptionBudget', poolerName)
    assert.deepEqual(budget.spec?.selector?.matchLabels, { 'cnpg.io/poolerName': poolerName })
    assert.ok(Number(budget.spec?.maxUnavailable) < (pooler.spec.instances ?? 1))
  })

  it("the pods: DATABASE_URL on the pooler's Service, as the runtime role, over TLS the operator's certificate answers", () => {
    const deployment = find<IDeployment>(manifests, 'Deployment', 'petstore')
    const { config, url, env } = databaseOf(deployment)
    // The Service the operator makes for a Pooler has the Pooler's name, and PgBouncer's port.
    assert.equal(url.hostname, poolerName)
    assert.equal(url.port, '5432')
    assert.equal(config.pooler, 'transaction', 'DATABASE_POOLER=transaction behind PgBouncer (D19)')
    assert.equal(url.pathname, `/${cluster.spec.bootstrap?.initdb?.database}`)
    // The runtime role the Cluster manages, with the password of the Secret it names.
    assert.equal(url.username, runtimeRole?.name)
    assert.equal(decodeURIComponent(url.password), SAMPLE_SECRETS[RUNTIME_SECRET]?.password)
    assert.equal(runtimeRole?.login, true)
    assert.equal(runtimeRole?.ensure, 'present')
    assert.notEqual(runtimeRole?.name, cluster.spec.bootstrap?.initdb?.owner, 'not the owner (D27)')
    // TLS, checked against the cluster's CA, for a name the server certificate carries.
    assert.equal(url.searchParams.get('sslmode'), 'verify-full')
    const ca = caFile(deployment, url.searchParams.get('sslrootcert') ?? '')
    assert.deepEqual(ca, { secret: `${clusterName}-ca`, key: 'ca.crt' })
    assert.ok(cluster.spec.certificates?.serverAltDNSNames?.includes(url.hostname))
    assert.equal(env.PETSTORE_MIGRATE, 'off', 'only the Job migrates')
  })

  it('the pods otherwise as the PostgreSQL overlay’s: probes, the stop, security, memory, keys, Service, ingress', () => {
    const ours = find<IDeployment>(manifests, 'Deployment', 'petstore')
    const theirs = find<IDeployment>(postgres, 'Deployment', 'petstore')
    // Only the database's variables and the CA's volume differ.
    const database = /^DATABASE_/
    const without = (d: IDeployment) => {
      const copy = structuredClone(d)
      const spec = podSpec(copy)
      const c = container(copy)
      c.env = c.env?.filter((v) => !database.test(v.name))
      c.volumeMounts = c.volumeMounts?.filter((m) => m.name !== 'postgres-ca')
      spec.volumes = spec.volumes?.filter((v) => v.name !== 'postgres-ca')
      return copy
    }
    assert.deepEqual(without(ours), without(theirs))
    assert.deepEqual(
      (container(ours).env ?? []).map((v) => v.name).filter((name) => database.test(name)),
      ['DATABASE_USER', 'DATABASE_PASSWORD', 'DATABASE_URL', 'DATABASE_POOLER'],
      'the parts of the URL before it, as $(NAME) needs',
    )
    assert.deepEqual(find(manifests, 'Service', 'petstore'), find(postgres, 'Service', 'petstore'))
    assert.deepEqual(
      find(manifests, 'PodDisruptionBudget', 'petstore'),
      find(postgres, 'PodDisruptionBudget', 'petstore'),
    )
    assertNetwork(manifests, ours)
    assertKeysFile(manifests, ours)
    assertLockedDown(ours)
    assertEphemeralStorage(ours)
  })

  it('the Job: `petstore migrate` on the -rw Service, as the owner, with the Secret the operator makes', () => {
    const job = find<IJob>(manifests, 'Job', 'petstore-migrate')
    const deployment = find<IDeployment>(manifests, 'Deployment', 'petstore')
    const { config, url } = databaseOf(job)
    assert.equal(url.hostname, `${clusterName}-rw`, "the operator's Service to the primary")
    assert.equal(url.port, '5432')
    assert.equal(config.pooler, 'none', 'straight to PostgreSQL: no pooler in between')
    assert.equal(url.pathname, `/${cluster.spec.bootstrap?.initdb?.database}`)
    assert.equal(url.username, cluster.spec.bootstrap?.initdb?.owner, 'the owner migrates (D27)')
    assert.equal(url.searchParams.get('sslmode'), 'verify-full')
    assert.deepEqual(caFile(job, url.searchParams.get('sslrootcert') ?? ''), {
      secret: `${clusterName}-ca`,
      key: 'ca.crt',
    })
    const secrets = (container(job).env ?? []).flatMap((v) => v.valueFrom?.secretKeyRef?.name ?? [])
    assert.deepEqual([...new Set(secrets)], [`${clusterName}-app`])
    // As the PostgreSQL overlay's Job otherwise.
    const c = container(job)
    assert.deepEqual(c.args, ['migrate'])
    assert.equal(c.image, container(deployment).image)
    assert.equal(
      c.env?.find((v) => v.name === 'PETSTORE_ENV')?.value,
      container(deployment).env?.find((v) => v.name === 'PETSTORE_ENV')?.value,
    )
    const theirs = find<IJob>(postgres, 'Job', 'petstore-migrate')
    assert.deepEqual(
      { ...job.spec, template: undefined },
      { ...theirs.spec, template: undefined },
      'backoff, deadline and ttl as the PostgreSQL overlay’s',
    )
    assertLockedDown(job)
    assertEphemeralStorage(job)
  })

  it('every Secret referenced is rendered, or one the operator makes, or the runtime role’s', () => {
    const workloads = [
      find<IDeployment>(manifests, 'Deployment', 'petstore'),
      find<IJob>(manifests, 'Job', 'petstore-migrate'),
    ]
    const outside = new Map<string, Set<string>>()
    for (const workload of workloads) {
      const refs = [
        ...(container(workload).env ?? []).flatMap((v) => v.valueFrom?.secretKeyRef ?? []),
        ...(podSpec(workload).volumes ?? []).flatMap((v) =>
          (v.secret?.items ?? []).map((item) => ({
            name: v.secret?.secretName ?? '',
            key: item.key,
            optional: v.secret?.optional,
          })),
        ),
      ]
      for (const ref of refs) {
        const rendered = manifests.find((m) => m.kind === 'Secret' && m.metadata.name === ref.name)
        if (rendered !== undefined) {
          const secret = rendered as unknown as ISecret
          const keys = Object.keys({ ...secret.data, ...secret.stringData })
          assert.ok(keys.includes(ref.key) || ref.optional === true, `${ref.name} has ${ref.key}`)
          continue
        }
        const keys = outside.get(ref.name ?? '') ?? new Set()
        outside.set(ref.name ?? '', keys.add(ref.key))
      }
    }
    assert.deepEqual([...outside.keys()].sort(), [
      `${clusterName}-app`,
      `${clusterName}-ca`,
      RUNTIME_SECRET,
    ])
    for (const [name, keys] of outside) {
      // The operator's keys, or a basic-auth Secret's (the runtime role's).
      const known = OPERATOR_SECRETS[name] ?? ['username', 'password']
      for (const key of keys) assert.ok(known.includes(key), `${name} has no key ${key}`)
    }
  })

  it('egress: the pods to the pooler’s pods, the Job to the instances, by the operator’s labels', () => {
    const policy = find<INetworkPolicy>(manifests, 'NetworkPolicy', 'petstore')
    assertEgress(policy, [4318, 5432, 6379, 6380])
    const database = policy.spec?.egress?.find((rule) => rule.ports?.some((p) => p.port === 5432))
    assert.deepEqual(database?.to, [
      { podSelector: { matchLabels: { 'cnpg.io/poolerName': poolerName } } },
    ])
    const migrate = find<INetworkPolicy>(manifests, 'NetworkPolicy', 'petstore-migrate')
    assert.deepEqual(migrate.spec?.ingress, [], 'nothing connects to the Job')
    assertEgress(migrate, [5432])
    const instances = migrate.spec?.egress?.find((rule) => rule.ports?.some((p) => p.port === 5432))
    assert.deepEqual(instances?.to, [
      {
        podSelector: {
          matchLabels: { 'cnpg.io/cluster': clusterName, 'cnpg.io/podRole': 'instance' },
        },
      },
    ])
    const job = find<IJob>(manifests, 'Job', 'petstore-migrate')
    const labels = job.spec?.template.metadata?.labels ?? {}
    const selector = migrate.spec?.podSelector?.matchLabels ?? {}
    assert.ok(Object.entries(selector).every(([key, value]) => labels[key] === value))
  })

  it("sizing: the pods' connections within a PgBouncer's, the poolers' within PostgreSQL's", () => {
    const deployment = find<IDeployment>(manifests, 'Deployment', 'petstore')
    const hpa = find<IHorizontalPodAutoscaler>(manifests, 'HorizontalPodAutoscaler')
    assert.equal(hpa.spec?.scaleTargetRef.name, deployment.metadata?.name)
    assert.equal(hpa.spec?.minReplicas, 3)
    const surge = Number(deployment.spec?.strategy?.rollingUpdate?.maxSurge)
    const pool = Number(configDefaults.DATABASE_POOL_SIZE)
    const parameters = pooler.spec.pgbouncer?.parameters ?? {}
    // All of them on one PgBouncer, should the Service send them there.
    assert.ok(
      ((hpa.spec?.maxReplicas ?? 0) + surge) * pool <= Number(parameters.max_client_conn),
      'max_client_conn',
    )
    // Every PgBouncer's server connections, and the Job's one, within max_connections less the
    // superusers' 3 (CloudNativePG's own connections are among those).
    const servers = (pooler.spec.instances ?? 1) * Number(parameters.default_pool_size) + 1
    const max = Number(cluster.spec.postgresql?.parameters?.max_connections)
    assert.ok(servers <= max - 3, `${servers} server connections within ${max} - 3`)
  })

  it('the instructions: the runtime Secret, the database, the Job, the grants, then the pods', () => {
    const text = readFileSync(join(FOLDER, 'kustomization.yaml'), 'utf8')
    const steps = text
      .split('\n')
      // The commands, not the `images:` example below them.
      .filter((line) => /^# {3}(kubectl|PRIMARY=)/.test(line))
      .map((line) => line.slice(4))
    const at = (part: string) => {
      const i = steps.findIndex((step) => step.includes(part))
      assert.ok(i >= 0, `a step with ${part}`)
      return i
    }
    // The Secret the Cluster names for the runtime role, with that role as its user.
    assert.ok(at(`create secret generic ${RUNTIME_SECRET} --type=kubernetes.io/basic-auth`) >= 0)
    assert.ok(text.includes(`--from-literal=username=${runtimeRole?.name} `))
    assert.ok(at(`label secret ${RUNTIME_SECRET} cnpg.io/reload=true`) < at('component=database'))
    assert.ok(at('component=database') < at(`cluster/${clusterName}`))
    assert.ok(at(`cluster/${clusterName}`) < at('in (config,migration)'))
    assert.ok(at('in (config,migration)') < at('job/petstore-migrate'))
    assert.ok(at('job/petstore-migrate') < at(`-v runtime=${runtimeRole?.name}`))
    assert.ok(at(`-v runtime=${runtimeRole?.name}`) < steps.length - 1)
    assert.ok(at(`ALTER ROLE ${runtimeRole?.name} SET statement_timeout`) < steps.length - 1)
    assert.match(
      steps.at(-1) ?? '',
      /^kubectl apply -k deploy\/kubernetes\/overlays\/cloudnative-pg$/,
    )
    // Each selector picks what its step says.
    const component = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/component'] ?? ''
    assert.deepEqual(kinds(manifests.filter((m) => component(m) === 'database')), [
      'Cluster/petstore-db',
      'PodDisruptionBudget/petstore-db-pooler-rw',
      'Pooler/petstore-db-pooler-rw',
    ])
    assert.deepEqual(
      kinds(manifests.filter((m) => ['config', 'migration'].includes(component(m)))),
      ['Job/petstore-migrate', 'NetworkPolicy/petstore-migrate', 'Secret/petstore'],
    )
    // The grants and the role's timeout go to the primary, as the superuser, in the database.
    const primary = steps.find((s) => s.startsWith('PRIMARY=')) ?? ''
    assert.ok(primary.includes(`cnpg.io/cluster=${clusterName},cnpg.io/instanceRole=primary`))
    const database = cluster.spec.bootstrap?.initdb?.database
    for (const step of steps.filter((s) => s.includes(' psql '))) {
      assert.ok(step.includes(`-d ${database}`) && step.includes('-U postgres'), step)
    }
  })

  it("the Secret's placeholders are refused at start, each naming its variable", () => {
    const values = find<ISecret>(manifests, 'Secret', 'petstore').stringData ?? {}
    assert.deepEqual(Object.keys(values).sort(), ['PETSTORE_API_KEYS', 'REDIS_URL'])
    for (const [name, value] of Object.entries(values)) {
      assert.match(value, /REPLACE ME/, `${name} is marked as a placeholder`)
      assert.throws(
        () => loadConfig({ DATABASE_URL: 'sqlite::memory:', [name]: value }),
        (error: unknown) => error instanceof ConfigError && error.message.startsWith(name),
      )
    }
  })

  it('the registry example pins the image by digest, for the Deployment and the Job', () => {
    const digest = `sha256:${'a'.repeat(64)}`
    const text = readFileSync(join(FOLDER, 'kustomization.yaml'), 'utf8')
    const example = text.slice(text.indexOf('# images:')).replace(/^# ?/gm, '')
    const [parsed] = parseYaml(example.replace('sha256:…', digest), 'cloudnative-pg') as {
      images: { name: string; newName?: string; newTag?: string; digest?: string }[]
    }[]
    const rendered = applyImages(render(FOLDER), parsed?.images ?? [])
    const images = rendered
      .filter((m) => m.kind === 'Deployment' || m.kind === 'Job')
      .map((m) => container(m as unknown as IDeployment).image)
    assert.equal(images.length, 2)
    for (const image of images) assert.ok(image?.endsWith(`@${digest}`), String(image))
  })
})
