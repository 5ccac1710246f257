package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// PutProject creates a project or sets its description (admin).
func (c *Client) PutProject(ctx context.Context, project, description string) (*Project, error) {
	return decode[Project](c)(c.raw.PutProject(ctx, project, &PutProjectParams{}, ProjectWrite{Description: &description}))
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

// PutItem writes an item (a full replacement) and answers its current
// version: a new one when something changed, else the one it already was.
func (c *Client) PutItem(ctx context.Context, project, key string, item ItemWrite) (*Item, error) {
	return decode[Item](c)(c.raw.PutItem(ctx, project, key, &PutItemParams{}, item))
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
