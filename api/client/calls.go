package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// PutProject creates a project or sets its description (admin).
func (c *Client) PutProject(ctx context.Context, project, description string) (*Project, error) {
	return decode[Project](c)(c.raw.PutProject(ctx, project, &PutProjectParams{}, ProjectWrite{Description: &description}))
}

// PutProjectWith creates a project or sets the members of w given (admin):
// its description and its on_excess_authority (refuse or propose: what an
// item write over its writer's grant or its source's ceiling becomes).
func (c *Client) PutProjectWith(ctx context.Context, project string, w ProjectWrite) (*Project, error) {
	return decode[Project](c)(c.raw.PutProject(ctx, project, &PutProjectParams{}, w))
}

// Project is a project, archived or not (ArchivedAt and ArchivedBy are set
// while it is archived).
func (c *Client) Project(ctx context.Context, project string) (*Project, error) {
	return decode[Project](c)(c.raw.GetProject(ctx, project))
}

// ArchiveProject archives a project (admin of it): it leaves the lists and
// refuses writes and packets (410 gone) while its history stays readable.
func (c *Client) ArchiveProject(ctx context.Context, project string) (*Project, error) {
	return decode[Project](c)(c.raw.ArchiveProject(ctx, project))
}

// RestoreProject brings an archived project back (admin of it); one that
// is not archived is a 409 conflict.
func (c *Client) RestoreProject(ctx context.Context, project string) (*Project, error) {
	return decode[Project](c)(c.raw.RestoreProject(ctx, project, &RestoreProjectParams{}))
}

// RolePolicy is a role's effective policy in a project: each member from
// the project's layer, else _shared's, else the default, with the layer
// that set it (Layers).
func (c *Client) RolePolicy(ctx context.Context, project, role string) (*RolePolicy, error) {
	return decode[RolePolicy](c)(c.raw.GetRolePolicy(ctx, project, role))
}

// PutRolePolicy sets the project's layer of a role's policy, whole (admin;
// in _shared, the default of every project), and answers the role's
// policy after it.
func (c *Client) PutRolePolicy(ctx context.Context, project, role string, p RolePolicyWrite) (*RolePolicy, error) {
	return decode[RolePolicy](c)(c.raw.PutRolePolicy(ctx, project, role, &PutRolePolicyParams{}, p))
}

// DeleteRolePolicy takes the project's layer of a role's policy away
// (admin; 404 when it sets none) and answers the role's policy after it.
func (c *Client) DeleteRolePolicy(ctx context.Context, project, role string) (*RolePolicy, error) {
	return decode[RolePolicy](c)(c.raw.DeleteRolePolicy(ctx, project, role))
}

// RolePolicies is a page of the roles with a policy in the project or in
// _shared (cursor "" for the first).
func (c *Client) RolePolicies(ctx context.Context, project, cursor string) (*RolePolicyList, error) {
	params := &ListRolePoliciesParams{}
	if cursor != "" {
		params.Cursor = &cursor
	}
	return decode[RolePolicyList](c)(c.raw.ListRolePolicies(ctx, project, params))
}

// PutItem writes an item (a full replacement) and answers its current
// version: a new one when something changed, else the one it already was.
// A write the server made a proposal instead (202: it claims more
// authority than its writer's grant or its source's ceiling allow, in a
// project whose on_excess_authority is propose) is a *ProposedError.
func (c *Client) PutItem(ctx context.Context, project, key string, item ItemWrite) (*Item, error) {
	res, err := c.raw.PutItem(ctx, project, key, &PutItemParams{}, item)
	if err == nil && res.StatusCode == http.StatusAccepted {
		p, err := decode[Proposal](c)(res, nil)
		if err != nil {
			return nil, err
		}
		return nil, &ProposedError{Proposal: p}
	}
	return decode[Item](c)(res, err)
}

// ProposedError is a write that became a proposal: stored, not current.
type ProposedError struct{ Proposal *Proposal }

func (e *ProposedError) Error() string {
	return fmt.Sprintf("item %s/%s was not written: it is proposal %d, pending until another principal promotes it (%s)",
		e.Proposal.Project, e.Proposal.Key, e.Proposal.Proposal, e.Proposal.Cause)
}

// Propose writes an item as a proposal (202): stored, never current,
// until another principal whose grant covers its authority promotes it.
func (c *Client) Propose(ctx context.Context, project, key string, item ItemWrite) (*Proposal, error) {
	yes := true
	item.Proposal = &yes
	return decode[Proposal](c)(c.raw.PutItem(ctx, project, key, &PutItemParams{}, item))
}

// Proposals lists a project's proposals, oldest first, of one status
// (pending, promoted, rejected; "" every one), from cursor ("" the first
// page).
func (c *Client) Proposals(ctx context.Context, project, status, cursor string) (*ProposalList, error) {
	return decode[ProposalList](c)(c.raw.ListProposals(ctx, project, &ListProposalsParams{Status: nonEmpty(status), Cursor: nonEmpty(cursor)}))
}

// ItemProposals lists an item's proposals, oldest first, of one status.
func (c *Client) ItemProposals(ctx context.Context, project, key, status string) (*ProposalList, error) {
	return decode[ProposalList](c)(c.raw.ListItemProposals(ctx, project, key, &ListItemProposalsParams{Status: nonEmpty(status)}))
}

// PromoteProposal makes a pending proposal the item's next version, with
// an optional note; rebase promotes one made against a version that is
// no longer current (409 stale_proposal without it). Its author may not
// (403 self_promotion).
func (c *Client) PromoteProposal(ctx context.Context, project, key string, proposal int, rebase bool, note string) (*Promotion, error) {
	body := ProposalPromote{Rebase: &rebase, Reason: nonEmpty(note)}
	return decode[Promotion](c)(c.raw.PromoteProposal(ctx, project, key, int32(proposal), &PromoteProposalParams{}, body))
}

// RejectProposal rejects a pending proposal with a reason (required).
func (c *Client) RejectProposal(ctx context.Context, project, key string, proposal int, reason string) (*Proposal, error) {
	return decode[Proposal](c)(c.raw.RejectProposal(ctx, project, key, int32(proposal), &RejectProposalParams{}, ProposalReject{Reason: reason}))
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Item is an item's latest version.
func (c *Client) Item(ctx context.Context, project, key string) (*Item, error) {
	return decode[Item](c)(c.raw.GetItem(ctx, project, key, &GetItemParams{}))
}

// DeleteItem writes a tombstone version of an item (its history stays).
func (c *Client) DeleteItem(ctx context.Context, project, key string) (*Item, error) {
	return decode[Item](c)(c.raw.DeleteItem(ctx, project, key, &DeleteItemParams{}))
}

// ImportItems writes up to 10,000 items in one transaction, all or nothing:
// each item is a JSON object in the given format (contextd: an ItemWrite
// with its key; kxm: a KXM ContextItem v1; navi: a navi ContextPacket).
// Importing the same items again changes nothing. A refusal's Problem
// points at the items at fault (/items/N/...).
func (c *Client) ImportItems(ctx context.Context, project string, format ImportRequestFormat, items []json.RawMessage) (*BatchResult, error) {
	return decode[BatchResult](c)(c.raw.ImportItems(ctx, project, &ImportItemsParams{}, ImportRequest{Format: format, Items: items}))
}

// Assemble assembles, stores and answers the packet for one prompt.
func (c *Client) Assemble(ctx context.Context, project string, req PacketRequest) (*Packet, error) {
	return decode[Packet](c)(c.raw.AssemblePacket(ctx, project, &AssemblePacketParams{}, req))
}

// Packet is a stored packet, as it was answered when it was assembled.
func (c *Client) Packet(ctx context.Context, project, id string) (*Packet, error) {
	return decode[Packet](c)(c.raw.GetPacket(ctx, project, id))
}

// Ablate makes a counterfactual packet: packetID's request assembled again
// on its snapshot without the entries named (each exactly one of Key, with
// Layer when it matters, Request or Handoff), stored as a packet of its own
// whose AblationOf is packetID. The left-out entries' records say
// excluded, reason ablated.
func (c *Client) Ablate(ctx context.Context, project, packetID string, without []AblationEntry) (*Packet, error) {
	return decode[Packet](c)(c.raw.AblatePacket(ctx, project, packetID, &AblatePacketParams{}, AblationRequest{Without: without}))
}

// Records are every decision a packet's assembly took, in order.
func (c *Client) Records(ctx context.Context, project, packetID string) (*RecordList, error) {
	return decode[RecordList](c)(c.raw.ListPacketRecords(ctx, project, packetID, &ListPacketRecordsParams{}))
}

// Why explains why a packet did or did not contain an item (q.Item, with
// q.Layer for a key in both layers), a handoff (q.Handoff) or one of the
// request's context packets (q.ContextPacket).
func (c *Client) Why(ctx context.Context, project, packetID string, q WhyPacketParams) (*WhyAnswer, error) {
	return decode[WhyAnswer](c)(c.raw.WhyPacket(ctx, project, packetID, &q))
}

// WhyItem is Why for an item key of the project's layer.
func (c *Client) WhyItem(ctx context.Context, project, packetID, key string) (*WhyAnswer, error) {
	return c.Why(ctx, project, packetID, WhyPacketParams{Item: &key})
}

// Attribute answers which records of a packet a text of its rendered
// prompt came from: one match per occurrence of the text.
func (c *Client) Attribute(ctx context.Context, project, packetID, text string) (*AttributeResult, error) {
	return decode[AttributeResult](c)(c.raw.AttributePacket(ctx, project, packetID, AttributeRequest{Text: &text}))
}

// RecordOutcome records how a packet's answer went (status required; an
// answer is attributed to the packet's spans as it is written).
func (c *Client) RecordOutcome(ctx context.Context, project, packetID string, o OutcomeCreate) (*Outcome, error) {
	return decode[Outcome](c)(c.raw.RecordOutcome(ctx, project, packetID, &RecordOutcomeParams{}, o))
}

// Outcomes is a page of a packet's outcomes, oldest first (cursor "" for
// the first).
func (c *Client) Outcomes(ctx context.Context, project, packetID, cursor string) (*OutcomeList, error) {
	q := ListOutcomesParams{}
	if cursor != "" {
		q.Cursor = &cursor
	}
	return decode[OutcomeList](c)(c.raw.ListOutcomes(ctx, project, packetID, &q))
}

// Suspects ranks a packet's included entries by the evidence that they
// caused its failed or partial outcomes (empty when it has none).
func (c *Client) Suspects(ctx context.Context, project, packetID string) (*Suspects, error) {
	return decode[Suspects](c)(c.raw.GetSuspects(ctx, project, packetID))
}

// ItemLedger is what an item cost and earned in one project's packets,
// over every version and a page per version (params may be nil; for a
// _shared item, params.Project names the packets' project).
func (c *Client) ItemLedger(ctx context.Context, project, key string, params *GetItemLedgerParams) (*ItemLedger, error) {
	return decode[ItemLedger](c)(c.raw.GetItemLedger(ctx, project, key, params))
}

// ProjectLedger is a page of the items of a project's packets in an order
// of the ledger: failure_rate (the default), tokens or unused.
func (c *Client) ProjectLedger(ctx context.Context, project string, params *GetProjectLedgerParams) (*ProjectLedger, error) {
	return decode[ProjectLedger](c)(c.raw.GetProjectLedger(ctx, project, params))
}

// CreateHandoff hands work to another role; the new handoff is pending
// (and supersedes the task's earlier pending handoff to that role).
func (c *Client) CreateHandoff(ctx context.Context, project string, h HandoffCreate) (*Handoff, error) {
	body, err := jsonBody(h)
	if err != nil {
		return nil, err
	}
	return decode[Handoff](c)(c.raw.CreateHandoffWithBody(ctx, project, &CreateHandoffParams{}, contentJSON, body))
}

// AcceptHandoff accepts a pending handoff (its target role, or an admin);
// reason may be empty.
func (c *Client) AcceptHandoff(ctx context.Context, project, id, reason string) (*Handoff, error) {
	return decode[Handoff](c)(c.raw.AcceptHandoff(ctx, project, id, &AcceptHandoffParams{}, transition(reason)))
}

// RejectHandoff rejects a pending handoff with a reason (its target role,
// or an admin).
func (c *Client) RejectHandoff(ctx context.Context, project, id, reason string) (*Handoff, error) {
	return decode[Handoff](c)(c.raw.RejectHandoff(ctx, project, id, &RejectHandoffParams{}, transition(reason)))
}

// WithdrawHandoff takes back a pending handoff with a reason (its source
// agent, or an admin); it becomes superseded.
func (c *Client) WithdrawHandoff(ctx context.Context, project, id, reason string) (*Handoff, error) {
	return decode[Handoff](c)(c.raw.WithdrawHandoff(ctx, project, id, &WithdrawHandoffParams{}, transition(reason)))
}

func transition(reason string) TransitionRequest {
	if reason == "" {
		return TransitionRequest{}
	}
	return TransitionRequest{Reason: &reason}
}

// Handoff is a handoff with its events, rework chain and packets.
func (c *Client) Handoff(ctx context.Context, project, id string) (*HandoffDetail, error) {
	return decode[HandoffDetail](c)(c.raw.GetHandoff(ctx, project, id, &GetHandoffParams{}))
}

// TaskHistory is a task's timeline: every handoff event and every packet,
// oldest first.
func (c *Client) TaskHistory(ctx context.Context, project, taskID string) (*TaskHistory, error) {
	return decode[TaskHistory](c)(c.raw.GetTaskHistory(ctx, project, taskID))
}

// decode reads the answer of a call into a new T.
func decode[T any](c *Client) func(*http.Response, error) (*T, error) {
	return func(res *http.Response, err error) (*T, error) {
		var out T
		if err := c.ReadAnswer(res, err, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
}

// Message is an element of PacketRequest.History: a message of the
// conversation so far (the generated model leaves the type unnamed).
type Message = struct {
	// Author person, agent or library
	Author *string `json:"author,omitempty"`

	// Content At most 100 KB.
	Content *string `json:"content,omitempty"`

	// Role user, assistant, tool or system
	Role *string `json:"role,omitempty"`
}

// UserMessage is a message a person wrote, for PacketRequest.History.
func UserMessage(content string) Message {
	return Message{Role: &userRole, Author: &personAuthor, Content: &content}
}

var userRole, personAuthor = "user", "person"
