package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/contextd/contextd/api/client"
)

// Give a role a policy: its packets take the budget and kinds from it
// when their requests name none, and say which layer set each.
func ExampleClient_PutRolePolicy() {
	ctx := context.Background()
	c := newProject("policy-example")
	budget := 6000
	if _, err := c.PutRolePolicy(ctx, "policy-example", "critic", client.RolePolicyWrite{
		TokenBudget: &budget, Kinds: &[]string{"knowledge", "state"},
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutItem(ctx, "policy-example", "chat", client.ItemWrite{Content: "Ada said hello.", Kind: refTo("episode"),
		Trigger: &client.Trigger{Always: refTo(true)}}); err != nil {
		log.Fatal(err)
	}
	p, err := c.Assemble(ctx, "policy-example", client.PacketRequest{TargetRole: "critic"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("budget", p.Budget.Allocated, "from", p.RolePolicy.Layers["token_budget"])
	fmt.Println("excluded", p.Excluded)
	pol, err := c.RolePolicy(ctx, "policy-example", "critic")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pol.Layers["kinds"], pol.Layers["format"], pol.Format)
	// Output:
	// budget 6000 from policy-example
	// excluded map[role_policy:1]
	// policy-example default markdown
}

func refTo[T any](v T) *T { return &v }
