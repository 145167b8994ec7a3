// The Kubernetes component's generated objects (deploy/kubernetes/components/monitoring/): the
// PrometheusRule holding the rule file's groups as they are, and the ConfigMap holding the
// dashboard for Grafana's dashboard sidecar. Both are written by `npm run monitoring`, never by
// hand; test/monitoring.test.ts fails when they differ from what this writes.
import type { Dashboard } from '@grafana/schema'
import type { RuleFile } from './rules.ts'

const LABELS = {
  'app.kubernetes.io/name': 'petstore',
  'app.kubernetes.io/component': 'monitoring',
}

export function prometheusRule(rules: RuleFile) {
  return {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'petstore', labels: LABELS },
    spec: rules,
  }
}

export function dashboardConfigMap(dashboard: Dashboard) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'petstore-dashboard',
      // The label Grafana's sidecar (kube-prometheus-stack's default) loads dashboards by.
      labels: { ...LABELS, grafana_dashboard: '1' },
    },
    data: { 'petstore.json': `${JSON.stringify(dashboard, null, 2)}\n` },
  }
}
