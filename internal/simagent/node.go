package simagent

import (
	"fmt"

	"github.com/google/uuid"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Node is the description one simulated agent registers. Nodes built from
// one Template share its attribute map and resources, which are never
// modified, so that a large fleet costs little memory per node.
type Node struct {
	ID         string
	Secret     string
	Name       string
	Datacenter string
	Class      string
	Attributes map[string]string
	Resources  *droverv1.NodeResources
	Reserved   *droverv1.NodeReservedResources
}

// Proto returns the node as sent in Node.Register. The attribute map and
// resources are copied, as the request may be changed by the gRPC stack.
func (n Node) Proto() *droverv1.Node {
	attrs := make(map[string]string, len(n.Attributes))
	for k, v := range n.Attributes {
		attrs[k] = v
	}
	return &droverv1.Node{
		Id:         n.ID,
		SecretId:   n.Secret,
		Name:       n.Name,
		Datacenter: n.Datacenter,
		NodeClass:  n.Class,
		Attributes: attrs,
		Resources:  n.Resources.CloneVT(),
		Reserved:   n.Reserved.CloneVT(),
	}
}

// Template describes a family of nodes. Node i gets a fresh id and secret,
// the name NamePrefix-i, and the datacenter and class at i modulo the
// lengths of Datacenters and Classes.
type Template struct {
	NamePrefix  string
	Datacenters []string
	Classes     []string
	Attributes  map[string]string
	Resources   *droverv1.NodeResources
	Reserved    *droverv1.NodeReservedResources
}

// DefaultTemplate is a mid-sized linux machine in datacenter dc1.
func DefaultTemplate() Template {
	return Template{
		NamePrefix:  "sim",
		Datacenters: []string{"dc1"},
		Classes:     []string{"standard"},
		Attributes:  map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"},
		Resources:   &droverv1.NodeResources{CpuMhz: 4000, MemoryMb: 8192, DiskMb: 100000},
		Reserved:    &droverv1.NodeReservedResources{CpuMhz: 100, MemoryMb: 256},
	}
}

// Node returns node i of the template, with a new random id and secret.
func (t Template) Node(i int) Node {
	return Node{
		ID:         uuid.NewString(),
		Secret:     uuid.NewString(),
		Name:       fmt.Sprintf("%s-%d", t.NamePrefix, i),
		Datacenter: pick(t.Datacenters, i),
		Class:      pick(t.Classes, i),
		Attributes: t.Attributes,
		Resources:  t.Resources,
		Reserved:   t.Reserved,
	}
}

// Nodes returns nodes 0 to n-1 of the template.
func (t Template) Nodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = t.Node(i)
	}
	return nodes
}

func pick(list []string, i int) string {
	if len(list) == 0 {
		return ""
	}
	return list[i%len(list)]
}
