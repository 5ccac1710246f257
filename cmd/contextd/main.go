package main

import (
	_ "github.com/jackc/pgx/v5"
	_ "github.com/labstack/echo/v4"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/pressly/goose/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/testcontainers/testcontainers-go/modules/postgres"
	_ "github.com/tiktoken-go/tokenizer"
)

func main() {}
