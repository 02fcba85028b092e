package harness

import (
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KarmadaContext is the kubeconfig context of the Karmada apiserver, named as
// karmadactl and Karmada's installers name it.
const KarmadaContext = "karmada-apiserver"

// writeAdminKubeconfig writes a single-context admin kubeconfig for components.
func (cp *ControlPlane) writeAdminKubeconfig(path, server string) error {
	cfg, err := cp.kubeconfig(map[string]string{"admin": server}, "admin")
	if err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// writeKubeconfig writes the user-facing kubeconfig: karmada-apiserver and one
// context per member, each with embedded credentials.
func (cp *ControlPlane) writeKubeconfig() error {
	servers := map[string]string{KarmadaContext: cp.Karmada.Host}
	for _, m := range cp.Members {
		servers[m.Name] = m.Endpoint
	}
	cfg, err := cp.kubeconfig(servers, KarmadaContext)
	if err != nil {
		return err
	}
	cp.Kubeconfig = cp.Dir + "/kubeconfig"
	return clientcmd.WriteToFile(*cfg, cp.Kubeconfig)
}

func (cp *ControlPlane) kubeconfig(servers map[string]string, current string) (*clientcmdapi.Config, error) {
	cert, err := os.ReadFile(cp.pki.AdminCert)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(cp.pki.AdminKey)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	for name, server := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.pki.caPEM}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin"}
	}
	cfg.CurrentContext = current
	return cfg, nil
}
