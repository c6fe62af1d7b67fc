// Package scope is the Kafka request pipeline's scope stage: a tenant's
// client names its topics, groups and transactional ids without any
// prefix; everything behind the stage uses the internal names
// (tenant~name, node.QualifyName). Request rewrites a decoded request to
// internal names and Response rewrites the answer back, removing whatever
// belongs to another tenant. It is pure: kmsg values in, kmsg values out.
package scope
