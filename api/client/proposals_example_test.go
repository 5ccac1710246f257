package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/auth"
)

// Propose an item, see that its author may not promote it, and promote it
// with another principal's key; a write over its source's ceiling in a
// project that makes such writes proposals comes back as a ProposedError.
func ExampleClient_PromoteProposal() {
	ctx := context.Background()
	admin := newProject("proposals-example")
	feedKey := agentKey(admin, "feed", "edit", "proposals-example")
	feed, err := client.New(serverURL, feedKey)
	if err != nil {
		log.Fatal(err)
	}
	p, err := feed.Propose(ctx, "proposals-example", "deploy.window", client.ItemWrite{Content: "Deploy on Tuesdays only."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("proposal", p.Proposal, p.Status, p.Cause)

	_, err = feed.PromoteProposal(ctx, "proposals-example", "deploy.window", int(p.Proposal), false, "")
	var prob *client.Problem
	if errors.As(err, &prob) {
		fmt.Println("its author:", prob.Status, prob.Code)
	}
	pr, err := admin.PromoteProposal(ctx, "proposals-example", "deploy.window", int(p.Proposal), false, "checked")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("promoted to version", pr.Item.Version, "of", pr.Item.Key)

	propose := "propose"
	if _, err := admin.PutProjectWith(ctx, "proposals-example", client.ProjectWrite{OnExcessAuthority: &propose}); err != nil {
		log.Fatal(err)
	}
	kind, source, authority := "instruction", "tool", "instruction"
	_, err = feed.PutItem(ctx, "proposals-example", "tool.rule", client.ItemWrite{Content: "Restart on error.", Kind: &kind, Source: &source, Authority: &authority})
	var proposed *client.ProposedError
	if errors.As(err, &proposed) {
		fmt.Println("proposed:", proposed.Proposal.Key, proposed.Proposal.Cause)
	}
	l, err := admin.Proposals(ctx, "proposals-example", "pending", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", len(l.Data))
	// Output:
	// proposal 1 pending asked
	// its author: 403 self_promotion
	// promoted to version 1 of deploy.window
	// proposed: tool.rule excess_authority
	// pending: 1
}

// agentKey makes an agent with the admin's client and returns its key.
func agentKey(c *client.Client, name string, perm auth.Permission, project string) string {
	var a client.AgentWithKey
	res, err := c.Raw().CreateAgent(context.Background(), &client.CreateAgentParams{},
		client.AgentCreate{Name: name, Role: name, Permission: string(perm), Projects: []string{project}})
	if err := c.ReadAnswer(res, err, &a); err != nil {
		log.Fatal(err)
	}
	return a.Key
}
