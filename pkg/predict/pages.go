package predict

import (
	"context"
	"encoding/json"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/generated/clientset/versioned/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// bindingPages lists the ResourceBindings of namespace page by page with a
// REST client of work.karmada.io/v1alpha2, and decodes each page while the
// next one is asked for: decoding a page of 500 bindings takes about as long
// as the API server takes to answer the next, so the two go side by side.
// Only the page's continue token is read before the next request.
func bindingPages(ctx context.Context, client rest.Interface, namespace string, collect func(*workv1alpha2.ResourceBinding)) error {
	decoder := scheme.Codecs.UniversalDeserializer()
	raw := make(chan []byte, 1)
	decoded := make(chan error, 1)
	go func() {
		var err error
		for page := range raw {
			if err != nil {
				continue
			}
			list := &workv1alpha2.ResourceBindingList{}
			if err = runtime.DecodeInto(decoder, page, list); err != nil {
				continue
			}
			for i := range list.Items {
				collect(slim(&list.Items[i]))
			}
		}
		decoded <- err
	}()

	opts := metav1.ListOptions{Limit: listPage}
	err := func() error {
		defer close(raw)
		for {
			// JSON: its continue token is read before the page is decoded.
			result := client.Get().Namespace(namespace).Resource("resourcebindings").
				VersionedParams(&opts, scheme.ParameterCodec).SetHeader("Accept", "application/json").Do(ctx)
			// Error, unlike Raw, takes the API server's Status from the
			// body: its message names who was refused what.
			if err := result.Error(); err != nil {
				return err
			}
			page, err := result.Raw()
			if err != nil {
				return err
			}
			var meta struct {
				Metadata metav1.ListMeta `json:"metadata"`
			}
			if err := json.Unmarshal(page, &meta); err != nil {
				return err
			}
			raw <- page
			if opts.Continue = meta.Metadata.Continue; opts.Continue == "" {
				return nil
			}
		}
	}()
	if decodeErr := <-decoded; err == nil {
		err = decodeErr
	}
	return err
}
