package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/internal/atomicfile"
)

// kubeconfig is the part of a kubeconfig file `jetplane kubeconfig`
// writes: one cluster, one user, one context.
type kubeconfig struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	Clusters       []any  `json:"clusters"`
	Users          []any  `json:"users"`
	Contexts       []any  `json:"contexts"`
	CurrentContext string `json:"current-context"`
}

func newKubeconfig(g *globals) *cobra.Command {
	var out, name, namespace string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Write a kubeconfig for kubectl and other Kubernetes clients",
		Long: `Write a kubeconfig that points Kubernetes clients (kubectl, client-go,
controller-runtime, k9s, Helm) at the running server's Kubernetes API, with
the token this command runs with (--token or JETPLANE_TOKEN): the same user,
role and namespaces.

The server is asked first, so a wrong URL or token fails here rather than in
the client. Kubernetes clients send a token only over https: serve with
--tls-cert and --tls-key when the API has tokens; --ca-file's certificate is
embedded so the client trusts the server.`,
		Example: `  jetplane kubeconfig -o ~/.kube/jetplane && KUBECONFIG=~/.kube/jetplane kubectl get configmaps -A
  jetplane kubeconfig --server https://jp.example:7070 --ca-file ca.pem --token "$TOKEN" > jetplane.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := g.token
			if token == "" {
				token = os.Getenv("JETPLANE_TOKEN")
			}
			u, err := url.Parse(g.server)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usage(fmt.Errorf("--server: %q is not an http(s) URL", g.server))
			}
			if token != "" && u.Scheme != "https" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not https; Kubernetes clients do not send the token over plain http, so the server will see them as unauthenticated\n", g.server)
			}
			if err := checkKubeAPI(cmd, g, token); err != nil {
				return err
			}
			cluster := map[string]any{"server": strings.TrimRight(g.server, "/")}
			if g.caFile != "" {
				ca, err := os.ReadFile(g.caFile)
				if err != nil {
					return err
				}
				cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(ca)
			}
			user := map[string]any{}
			if token != "" {
				user["token"] = token
			}
			ctx := map[string]any{"cluster": name, "user": name}
			if namespace != "" {
				ctx["namespace"] = namespace
			}
			kc := kubeconfig{
				APIVersion: "v1", Kind: "Config",
				Clusters:       []any{map[string]any{"name": name, "cluster": cluster}},
				Users:          []any{map[string]any{"name": name, "user": user}},
				Contexts:       []any{map[string]any{"name": name, "context": ctx}},
				CurrentContext: name,
			}
			b, err := yaml.Marshal(kc)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			// The file holds a token: readable by its owner only.
			return atomicfile.Write(out, b, 0o600)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (mode 0600); default standard output")
	cmd.Flags().StringVar(&name, "name", "jetplane", "name of the cluster, user and context in the file")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "default namespace of the context")
	return cmd
}

// checkKubeAPI asks the server's Kubernetes API for its versions with
// token, so that a wrong server or token is reported now.
func checkKubeAPI(cmd *cobra.Command, g *globals, token string) error {
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, strings.TrimRight(g.server, "/")+"/api", nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := g.httpClient()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reach %s: %w; is 'jetplane serve' running there?", g.server, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusUnauthorized:
		return fmt.Errorf("%s refuses the token: pass a valid one with --token or JETPLANE_TOKEN", g.server)
	case http.StatusNotFound:
		return fmt.Errorf("%s serves no Kubernetes API (GET /api: 404); is it jetplane, of a version that serves it?", g.server)
	}
	return fmt.Errorf("%s: GET /api: %s: %s", g.server, resp.Status, strings.TrimSpace(string(body)))
}
